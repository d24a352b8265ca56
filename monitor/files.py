"""Atomic file replacement (readers see the old or the new content, never a part), append-only logs, and a
folder's owner lock."""
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


def open_append(path: str) -> int:
    """A file descriptor appending to ``path`` (created, 0644, its folder too): each ``os.write`` of whole lines
    lands at the end, also beside another writer. Raises OSError."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


_HELD: dict[str, list] = {}  # this process's locks: path -> [open lock file, holders in this process]


def lock(path: str) -> str | None:
    """Hold an exclusive ``flock`` on ``path`` (created; this process's id written in it) for one more holder of
    this process (its holders share it: a monitor made again in one process takes over). Returns None, or, when
    another process holds it, the id that process wrote there ("?" when none). The lock is the process's until
    its last holder calls :func:`unlock`; the kernel releases it when the process ends, however it ends.
    Raises OSError (the folder cannot be written)."""
    held = _HELD.get(path)
    if held is None:
        f = open(path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read(32).strip()
            f.close()
            return holder or "?"
        f.truncate(0)
        f.write(str(os.getpid()))
        f.flush()
        held = _HELD[path] = [f, 0]
    held[1] += 1
    return None


def unlock(path: str) -> None:
    """One holder of ``path``'s lock (:func:`lock`) lets it go; the last one releases it."""
    held = _HELD[path]
    held[1] -= 1
    if not held[1]:
        held[0].close()
        del _HELD[path]
