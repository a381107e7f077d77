"""tests/pywarm.py — the venv's python with torch already imported, for the suite's tests.

Importing torch, transformers and diffusers costs 7-10 s of CPU, and the tests that need
the venv start it dozens of times (tools/embed_captions.py under `tessera ingest` and
`sample --prompt`, the references of tests/model/*.py). One server imports them once; each
run is a fork of it, which then does what a fresh `python ARGS` does from there on, with
the caller's arguments, working folder, environment, umask and standard streams:

    PYTHON tests/pywarm.py serve SOCKET   the server (the pywarm ctest fixture starts it;
                                          it ends when SOCKET is removed or after 20
                                          minutes without a run)
    PYTHON tests/pywarm.py ARGS...        one run: `python ARGS` (ARGS a script and its
                                          arguments, -c CODE, or - for a script on stdin)

A run exits with the script's status. Without the server (its socket absent, or
PYWARM_OFF=1), or for python options it does not know, the run is an ordinary
`PYTHON ARGS`: the same script, only slower. Killing a run (any signal) kills its fork.
The server runs offline (HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE) as embed_captions.py does:
the venv's models are local folders. OMP_NUM_THREADS is applied to torch in each run (the
server imported it without), so a run uses the threads a fresh process would.
"""
import json
import os
import signal
import socket
import sys
import threading
import time
import types

IDLE_S = 1200


def preload():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.pop("OMP_NUM_THREADS", None)
    mods = {}
    for name in ("numpy", "torch", "transformers", "sentence_transformers", "diffusers",
                 "safetensors.torch", "peft"):
        try:
            mods[name] = __import__(name)
        except ImportError:
            pass
    if "diffusers" in mods:   # diffusers imports its models on first use
        try:
            from diffusers import WanTransformer3DModel, WanPipeline  # noqa: F401
        except ImportError:
            pass
    return mods.get("torch")


def run_child(conn, torch, default_threads):
    """In the fork: become the caller's `python ARGS` and report its exit status."""
    fds = []
    try:
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        req = json.loads(msg)
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(req["cwd"])
        os.umask(req["umask"])
        os.environ.clear()
        os.environ.update(req["env"])
        args = req["args"]
        if req["python"] != sys.executable:
            raise ValueError(f"{req['python']} asked, this is {sys.executable}")
    except Exception as e:  # noqa: BLE001  (the caller reruns cold)
        os._exit(99)   # before the pid line: the caller runs the script cold
    conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")

    def watch():   # the caller gone (killed): so is this run
        try:
            while conn.recv(1):
                pass
        except OSError:
            pass
        os._exit(137)
    threading.Thread(target=watch, daemon=True).start()
    if torch is not None:
        n = os.environ.get("OMP_NUM_THREADS", "")
        torch.set_num_threads(int(n) if n.isdigit() and int(n) > 0 else default_threads)
    code = 0
    try:
        main = types.ModuleType("__main__")
        if args[0] == "-c":
            sys.argv = ["-c"] + args[2:]
            sys.path[0] = ""
            src, name = args[1], "<string>"
        elif args[0] == "-":
            sys.argv = args
            sys.path[0] = ""
            src, name = sys.stdin.buffer.read(), "<stdin>"
        else:
            sys.argv = args
            sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
            with open(args[0], "rb") as f:
                src, name = f.read(), args[0]
            main.__file__ = name
        sys.modules["__main__"] = main
        exec(compile(src, name, "exec"), main.__dict__)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:  # noqa: BLE001  (as the interpreter: traceback, status 1)
        import traceback
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        code = 1
    try:
        import atexit
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        code = code or 120
    # every file closed before the status is sent: a lock the script held is free once the
    # caller returns
    keep = conn.fileno()
    os.closerange(0, keep)
    os.closerange(keep + 1, 65536)
    try:
        conn.sendall(json.dumps({"exit": code & 0xFF}).encode() + b"\n")
    finally:
        os._exit(code & 0xFF)


def serve(path):
    torch = preload()
    default_threads = torch.get_num_threads() if torch is not None else 1
    tmp = f"{path}.{os.getpid()}"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(tmp)
    srv.listen(64)
    os.rename(tmp, path)   # the socket appears once the imports are done
    ino = os.stat(path).st_ino
    signal.signal(signal.SIGCHLD, lambda *_: None)
    srv.settimeout(2.0)
    last = time.monotonic()
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        try:
            if os.stat(path).st_ino != ino:
                break
        except OSError:
            break
        if time.monotonic() - last > IDLE_S:
            break
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        last = time.monotonic()
        conn.settimeout(None)
        if os.fork() == 0:
            srv.close()
            run_child(conn, torch, default_threads)
        conn.close()
    try:
        if os.stat(path).st_ino == ino:
            os.unlink(path)
    except OSError:
        pass


def cold(args):
    os.execv(sys.executable, [sys.executable] + args)


def client(args):
    path = os.environ.get("PYWARM_SOCKET", "")
    known = args and (args[0] in ("-", "-c") and (args[0] == "-" or len(args) > 1)
                      or not args[0].startswith("-"))
    if not path or os.environ.get("PYWARM_OFF") == "1" or not known:
        cold(args)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        cold(args)
    env = dict(os.environ)
    mask = os.umask(0)
    os.umask(mask)
    req = json.dumps({"args": args, "cwd": os.getcwd(), "env": env, "umask": mask,
                      "python": sys.executable})
    socket.send_fds(s, [req.encode()], [0, 1, 2])
    f = s.makefile("rb")
    line = f.readline()
    if not line:
        cold(args)   # the server could not start the run: nothing of it ran
    pid = json.loads(line)["pid"]

    def forward(sig, _):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                signal.SIGUSR2):
        signal.signal(sig, forward)
    line = f.readline()
    if not line:   # died of a signal: say so as a shell would see it
        sys.exit(137)
    sys.exit(json.loads(line)["exit"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"] and len(sys.argv) == 3:
        serve(sys.argv[2])
    else:
        client(sys.argv[1:])
