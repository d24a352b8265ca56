"""Atomic file replacement (readers see the old or the new content, never a part), and a folder's owner lock."""
from __future__ import annotations

import fcntl
import os
import secrets


def write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` via a temporary file in the same folder, fsync and rename: readers
    see the old or the new content, never a part. The file gets the permissions a plain ``open(path, "w")``
    gives (0666 less the process umask), so other users (Prometheus reading a file_sd target) can read it as
    they could any file the process writes. Raises OSError."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    while True:
        tmp = os.path.join(folder, f".tmp-{os.path.basename(path)}-{secrets.token_hex(6)}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:  # (48 random bits taken: try another name)
            continue
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def hold_lock(path: str):
    """Take an exclusive ``flock`` on ``path`` (created) for this process and write its id there. Returns
    ``(file, None)``, the open file holding the lock (closing it releases the lock; the kernel releases it when
    the process ends, however it ends), or ``(None, holder)`` when another open file holds it, ``holder`` the
    process id written by whoever took it (text, maybe empty). Raises OSError (the folder cannot be written)."""
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read(32).strip()
        f.close()
        return None, holder
    f.truncate(0)
    f.write(str(os.getpid()))
    f.flush()
    return f, None
