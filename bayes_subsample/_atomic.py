"""Files that appear complete or not at all.

A :class:`StagedFile` is written under no name, or a temporary one, in the
folder of its destination, flushed and fsynced, and only then given its
name, in one step: ``link`` (which fails if the name exists, so the rule
"never overwrite" holds at that moment, and two processes racing for one
name cannot both win) or, to overwrite, ``rename`` over the old file. A
reader, or a process killed at any moment, sees the old file or the whole
new one, never a part.

On Linux the file is opened with ``O_TMPFILE``: it has no name until it is
published, so a process killed even by SIGKILL leaves nothing behind, except
when it overwrites: an anonymous file cannot be renamed over another, so it
is first linked to a hidden temporary name, then renamed, and a SIGKILL in
the microseconds between leaves that name. Elsewhere (or on a file system
without ``O_TMPFILE``) the file is written under the hidden name from the
start, removed on every exit but SIGKILL or a power cut.

The hidden name is ``.<name>.<host>-<pid>.<random>.part``. A later
:class:`StagedFile` for the same destination removes the ones a process of
this host that no longer runs left behind, so a killed run's leftover lasts
until the next write of that file.
"""
import errno
import os
import secrets
import socket
from pathlib import Path

__all__ = ["StagedFile", "write_bytes", "fsync_folder", "probe_folder", "remove_stale"]

_PROC_FD = "/proc/self/fd"


def _host():
    # a '-' or '.' in the host name would make the name ambiguous to parse
    return socket.gethostname().replace(".", "_").replace("-", "_") or "host"


def _temp_name(path):
    return path.with_name(f".{path.name}.{_host()}-{os.getpid()}.{secrets.token_hex(6)}.part")


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True                # it exists (another user's process)
    return True


def remove_stale(path):
    """Remove the hidden temporary files of ``path`` that a process of this
    host that no longer runs left behind (killed between naming a file and
    renaming it into place); returns the names removed. Files of other
    hosts (a shared folder) and of running processes are left alone."""
    path = Path(path)
    prefix, host = f".{path.name}.", _host()
    removed = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not (name.startswith(prefix) and name.endswith(".part")):
            continue
        owner = name[len(prefix):-len(".part")].rsplit(".", 1)[0]   # host-pid
        who, _, pid = owner.rpartition("-")
        if who != host or not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(name)
    return removed


def fsync_folder(folder):
    """Make a rename or link in ``folder`` durable (a no-op where folders
    cannot be fsynced)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class StagedFile:
    """A new file for ``path``, put in place complete by :meth:`publish`.

    Write to :attr:`file` (a binary file object), then call
    :meth:`publish`; :meth:`discard` (also on leaving a ``with`` block
    without publishing) removes it. Symbolic links in ``path`` are followed:
    the file the link names is replaced.

    Parameters
    ----------
    path : str or path-like
        The destination; its folder must exist.

    Raises
    ------
    OSError
        If the folder does not take a new file (missing, read-only, full).
    """

    def __init__(self, path):
        self.path = Path(os.path.realpath(path))
        self.folder = self.path.parent
        self._temp = None          # the temporary name, if it has one
        self._fd = None
        self.published = False
        remove_stale(self.path)
        self._fd = self._open_anonymous()
        if self._fd is None:
            self._fd, self._temp = self._open_named()
        self.file = open(self._fd, "wb", closefd=False)

    # -- opening --------------------------------------------------------------------
    def _open_anonymous(self):
        """An ``O_TMPFILE`` descriptor in the folder, or None where the
        platform or the file system has none, or cannot link it."""
        flag = getattr(os, "O_TMPFILE", None)
        if flag is None or not os.path.isdir(_PROC_FD):
            return None
        try:
            fd = os.open(self.folder, flag | os.O_WRONLY | os.O_CLOEXEC, 0o666)
        except OSError as e:
            if e.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                return None        # a file system (or kernel) without O_TMPFILE
            raise
        dev = os.fstat(fd).st_dev
        if dev not in _LINKS_ANONYMOUS:
            _LINKS_ANONYMOUS[dev] = _links_anonymous(self.folder, flag)
        if not _LINKS_ANONYMOUS[dev]:
            os.close(fd)
            return None
        return fd

    def _open_named(self):
        while True:
            temp = _temp_name(self.path)
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
                return os.open(temp, flags, 0o666), temp
            except FileExistsError:
                continue

    # -- finishing ------------------------------------------------------------------
    def _flush(self):
        """Write out the buffers and fsync: a full disk or a file-size limit
        is reported here, before the file has a name."""
        self.file.flush()
        os.fsync(self._fd)

    def publish(self, overwrite=False):
        """Give the complete file its name; returns the path.

        Raises ``FileExistsError`` if the name exists and not ``overwrite``,
        or another ``OSError`` (a full disk, a file-size limit); the file is
        then unpublished, and :meth:`discard` leaves nothing behind.
        """
        path = self.path
        self._flush()
        if self._temp is None:
            self._publish_anonymous(path, overwrite)
        else:
            self._publish_named(path, overwrite)
        self.published = True
        self._close()
        fsync_folder(path.parent)
        return path

    def _publish_anonymous(self, path, overwrite):
        if not overwrite:
            _link_fd(self._fd, path)             # EEXIST if it exists
            return
        # a name beside it first, then renamed over the old file in one step
        while True:
            temp = _temp_name(path)
            try:
                _link_fd(self._fd, temp)
                break
            except FileExistsError:
                continue
        try:
            os.replace(temp, path)
        except BaseException:
            _unlink(temp)
            raise

    def _publish_named(self, path, overwrite):
        temp = self._temp
        if overwrite:
            os.replace(temp, path)
        else:
            try:
                os.link(temp, path)                # EEXIST if it exists
            except OSError as e:
                if e.errno == errno.EEXIST:
                    raise
                # a file system without hard links: claim the name, then
                # rename over the (empty) claim
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
                os.replace(temp, path)
            else:
                _unlink(temp)
        self._temp = None

    def _close(self):
        if self._fd is not None:
            try:
                self.file.close()
            except OSError:
                pass               # buffered bytes of a discarded file
            os.close(self._fd)
            self._fd = None

    def discard(self):
        """Remove the file unless it was published (idempotent)."""
        if self.published:
            return
        self._close()
        if self._temp is not None:
            _unlink(self._temp)
            self._temp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.discard()


def _link_fd(fd, path):
    """Give the anonymous file ``fd`` the name ``path`` (``FileExistsError``
    if it exists). Through ``linkat(AT_SYMLINK_FOLLOW)`` of its /proc link:
    ``os.link`` calls ``link(2)``, which does not follow the /proc link,
    unless a folder descriptor is given."""
    path = Path(path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.link(f"{_PROC_FD}/{fd}", path.name, dst_dir_fd=folder, follow_symlinks=True)
    finally:
        os.close(folder)


#: st_dev -> whether an O_TMPFILE file of that file system can be given a name
_LINKS_ANONYMOUS = {}


def _links_anonymous(folder, flag):
    """Whether the file system of ``folder`` can name an anonymous file (a
    throwaway one is named briefly: a file can be linked from /proc once)."""
    fd = os.open(folder, flag | os.O_WRONLY | os.O_CLOEXEC, 0o666)
    probe = Path(folder) / f".bayes_subsample-probe-{secrets.token_hex(6)}"
    try:
        _link_fd(fd, probe)
    except OSError:
        return False
    else:
        _unlink(probe)
        return True
    finally:
        os.close(fd)


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write_bytes(path, data, overwrite=False):
    """Write ``data`` (bytes) to ``path`` through a :class:`StagedFile`;
    returns the path. ``FileExistsError`` if ``path`` exists and not
    ``overwrite``; on any error nothing is left behind."""
    with StagedFile(path) as staged:
        staged.file.write(data)
        return staged.publish(overwrite)


def probe_folder(folder):
    """Raise the ``OSError`` that writing a new file in ``folder`` would
    meet (missing, not a folder, read-only, no permission), without leaving
    a file there."""
    StagedFile(Path(folder) / ".bayes_subsample-probe").discard()
