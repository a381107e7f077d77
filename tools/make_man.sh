#!/usr/bin/env bash
# tools/make_man.sh TESSERA — the man page tessera(1) on stdout, made from the binary's own
# `--help` texts (the top level, every command, every `index` subcommand), so the page
# says exactly what `--help` says. `cmake --install` runs it (tools/CMakeLists.txt).
set -euo pipefail
T=${1:?usage: make_man.sh PATH/TO/tessera}

# roff-safe text: backslashes doubled, a leading dot or quote kept from becoming a request
roff() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
commands=$("$T" --help | sed -n 's/^  \([a-z]\+\) .*/\1/p' | grep -vx help)
subs=$("$T" index --help | sed -n 's/^  \([a-z]\+\) .*/\1/p')
version=$("$T" --version | head -n 1)

printf '.TH TESSERA 1 "" "%s" "User Commands"\n' "$version"
printf '.SH NAME\ntessera \\- train video diffusion transformers on clips of seconds to minutes\n'
printf '.SH SYNOPSIS\n.B tessera\n.I command\n[options]\n'
printf '.SH DESCRIPTION\n.nf\n'
"$T" --help | roff
printf '.fi\n'
for c in $commands; do
  printf '.SH "TESSERA %s"\n.nf\n' "${c^^}"
  "$T" "$c" --help | roff
  printf '.fi\n'
  if [ "$c" = index ]; then
    for s in $subs; do
      printf '.SS "tessera index %s"\n.nf\n' "$s"
      "$T" index "$s" --help | roff
      printf '.fi\n'
    done
  fi
done
printf '.SH FILES\nThe presets and scripts: PREFIX/share/tessera (configs/, tools/), or the source tree\n'
printf 'the binary was built from; TESSERA_DATA_DIR overrides both.\n'
printf '.SH SEE ALSO\nThe documentation in docs/ of tessera'"'"'s source tree, starting at docs/README.md.\n'
