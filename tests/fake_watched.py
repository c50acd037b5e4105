"""A stand-in for a process traced with `cuptrace record --on-demand`, for top_attach_test.sh:
it listens on the control socket the injected library would (src/control/control.h: the
directory $XDG_RUNTIME_DIR/cuptrace, the name j<job>.p<pid>.sock), answers "watch DIR" as the
library does (a "watching" line, then the connection kept open) and writes a capture from
tests/data into DIR/p<pid>.w1.cupti in pieces, as a growing capture would be. When top hangs up
it writes "hangup" to the marker file and exits 0. Mode refuse: answers every watch with the
library's refusal for a window opened by a trigger.

Usage: fake_watched.py CAPTURE MARKER [refuse]"""
import os
import socket
import stat
import sys
import time

cap, marker = sys.argv[1], sys.argv[2]
refuse = len(sys.argv) > 3 and sys.argv[3] == "refuse"
d = os.path.join(os.environ["XDG_RUNTIME_DIR"], "cuptrace")
os.makedirs(d, mode=0o700, exist_ok=True)
path = os.path.join(d, f"j{os.environ.get('CUPTRACE_JOB', '0')}.p{os.getpid()}.sock")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(4)
open(marker, "w").write("listening\n")
try:
    while True:
        c, _ = srv.accept()
        req = b""
        while not req.endswith(b"\n"):
            b = c.recv(1)
            if not b:
                break
            req += b
        req = req.decode().strip()
        if not req.startswith("watch "):
            c.sendall(b"error: unknown request\n")
            c.close()
            continue
        wdir = req[6:]
        st = os.lstat(wdir)
        if refuse:
            c.sendall(b"error: window 3 is open already (opened by a trigger or the window "
                      b"options): watch once it closes\n")
            c.close()
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o077 or st.st_uid != os.geteuid():
            c.sendall(b"error: watch directory not private\n")
            c.close()
            continue
        c.sendall(f"watching: window 1 into {wdir}/p{os.getpid()}.w1.cupti until this "
                  "connection closes\n".encode())
        data = open(cap, "rb").read()
        with open(os.path.join(wdir, f"p{os.getpid()}.w1.cupti"), "wb") as out:
            step = len(data) // 5 + 1
            for i in range(0, len(data), step):
                out.write(data[i:i + step])
                out.flush()
                time.sleep(0.1)
        # Kept open until top leaves: EOF is the hang-up.
        while c.recv(256):
            pass
        open(marker, "a").write("hangup\n")
        c.close()
        break
finally:
    os.unlink(path)
