"""Subprocess helper of the crash/lock tests (``python -m tests.backend.writer_proc`` from the
repository root; see REPO_ENV in storehelp).

  writer_proc.py count ROOT NAME MARKER   write a version, print the number of fs operations
  writer_proc.py kill ROOT NAME MARKER K  write a version, SIGKILL itself before fs op K
  writer_proc.py hold ROOT NAME RUN_ID    take the writer lock, print "held", sleep forever
"""
import os
import signal
import sys
import time

from tests.backend.storehelp import OpHook, write_version

from reuse_backend.store import Cache


def main(argv):
    cmd, root, name = argv[:3]
    cache = Cache(root, name)
    if cmd == "count":
        with OpHook() as hook:
            write_version(cache, int(argv[3]))
        print(hook.count)
        print(" ".join(op for op, _ in hook.ops), file=sys.stderr)
    elif cmd == "kill":
        with OpHook(int(argv[4]), lambda op, path: os.kill(os.getpid(), signal.SIGKILL)):
            write_version(cache, int(argv[3]))
    elif cmd == "hold":
        lock = cache.writer_lock(argv[3])
        lock.heartbeat_s = 0.2
        lock.acquire()
        print("held", flush=True)
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1:])
