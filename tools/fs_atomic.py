"""tools/fs_atomic.py — the Python tools' one way to write an output file, as tessera's own
writers do (core/fs.h fs_atomic): a temporary file of this writer's alone beside it
(NAME.tmp.PID.RAND, created exclusively, so never a link, a FIFO or another writer's
file), synced, renamed over the path. A reader, a crash, or a second writer at once see
the old file or one writer's whole new one, never a part."""
import json
import os
import tempfile


def write_atomic(path, data):
    """Replaces the file at path with the bytes data, whole"""
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.%d." % os.getpid(),
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_json(path, obj, indent):
    """Replaces the file at path with obj as JSON text (json.dump's, indent spaces a level),
    whole"""
    write_atomic(path, json.dumps(obj, indent=indent).encode())
