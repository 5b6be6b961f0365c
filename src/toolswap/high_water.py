"""The artifact high-water mark: a name, once handed out, is never handed out again (S6).

Cleanup deletes artifacts, so the highest name *on disk* is not the highest
name *ever used*: numbering after the directory alone would give a deleted
artifact's name to new bytes, and a stale Memory record would then point at
content it never saw.  The mark remembers every number ever reserved.

Rules
=====

* The mark lives in ``<session>/.artifact-high-water``: one decimal number per
  line, appended in increasing order, each line ending in ``\\n``.
* Every reservation happens under the session lock (the lock cleanup apply
  holds while it deletes), so appends are strictly increasing and the last
  complete line is the maximum; only the tail is ever read.
* A number is appended and fsynced *before* the file of that name is created,
  so any name that can exist on disk after a crash is already in the mark.
* A torn last line (a crash inside the append) never reached its fsync, so
  its name was never created: it is cut off before the next append.
* Anything else that is not a number line is corruption: reservation refuses
  (fail closed) rather than guess and risk reusing a name.  So is a mark (or
  a deletion record) with more than one hard link: another name may be
  outside the session, and the append would change that file too.

A missing mark is not a fresh session
=====================================

If the mark is missing (or holds no complete line), numbering does not
restart: the mark is reconstructed, under the session lock, as the largest of
every durable source of names ever used, and written back before the next
name is handed out:

* the names on disk in ``tool-results/``;
* every name claimed in the lease journal (each PREPARED intent's source
  id), after the journal verifies in full -- and the journal anchor must
  agree that the journal is all there.  After a compaction the settled
  leases' intents are in the archive only; the snapshot's
  ``artifact_high_water`` remembers their highest number
  (:meth:`~toolswap.journal.ArtifactRetentionJournal.claimed_artifact_high_water`);
* ``.artifact-deleted-high-water``: before cleanup unlinks anything it
  appends (and fsyncs) the highest number it is about to delete
  (:meth:`ArtifactHighWaterMark.record_deletion`), so a name that cleanup
  removed is remembered apart from the mark.  Same format as the mark.

Where even that cannot be trusted -- a journal that fails verification, a
journal missing while its anchor says it existed, an unreadable or corrupt
deletion record -- reservation refuses with
:class:`~toolswap.errors.CorruptStateError` (fail closed) and names what to
restore.  What it cannot catch: someone who removes the mark *and* the
deletion record *and* the deleted artifacts' leases (see the threat model in
``docs/design.md`` section 5).
"""

from __future__ import annotations

import os

from .errors import ArtifactWriteError, CorruptStateError, EnvironmentFailure
from .fs import FileSystem, HardLinkedFileError, hard_link_message
from .session import SessionPaths

__all__ = ["DELETED_NAME", "HIGH_WATER_NAME", "ArtifactHighWaterMark"]

HIGH_WATER_NAME = ".artifact-high-water"
DELETED_NAME = ".artifact-deleted-high-water"

# Enough for the last complete line and the newline before it: numbers have
# at most a few dozen digits long before anything else breaks.
_TAIL_BYTES = 64


class ArtifactHighWaterMark:
    """Read and advance one session's mark; the caller holds the session lock."""

    def __init__(self, paths: SessionPaths, fs: FileSystem) -> None:
        self._path = os.path.join(paths.root, HIGH_WATER_NAME)
        self._deleted_path = os.path.join(paths.root, DELETED_NAME)
        self._paths = paths
        self._root = paths.root
        self._fs = fs
        # A process killed right after creating the mark leaves its directory
        # entry in the page cache only, so each instance syncs the entry once.
        self._entry_synced = False

    def advance(self, at_least: int) -> int:
        """Durably record and return a number above the mark and above ``at_least``."""
        fs = self._fs
        try:
            facts = fs.lstat(self._path)
        except FileNotFoundError:
            facts = None
        except OSError as exc:
            raise EnvironmentFailure(f"cannot inspect {HIGH_WATER_NAME}: {exc}") from exc
        if facts is not None and (facts.is_symlink or not facts.is_regular):
            raise CorruptStateError(f"{HIGH_WATER_NAME} is not a regular file (S6, S7)")
        try:
            handle = fs.open_append(self._path, 0o600)
        except HardLinkedFileError as exc:  # the append could land outside the session
            raise CorruptStateError(f"{HIGH_WATER_NAME} is not written: {exc.strerror}") from exc
        except OSError as exc:
            raise EnvironmentFailure(f"cannot open {HIGH_WATER_NAME}: {exc}") from exc
        try:
            mark = self._read_and_repair(handle)
            if mark == 0:  # no mark (or never a complete line): is this really new?
                mark = self._reconstruct()
            number = max(mark, at_least) + 1
            fs.write(handle, b"%d\n" % number)
            fs.crash_point("externalize.before_high_water_fsync")
            fs.fsync(handle)
        except OSError as exc:
            raise ArtifactWriteError(f"cannot advance {HIGH_WATER_NAME}: {exc}") from exc
        finally:
            fs.close(handle)
        if not self._entry_synced:
            try:
                fs.fsync_dir(self._root)
            except OSError as exc:
                raise ArtifactWriteError(f"cannot fsync the session folder: {exc}") from exc
            self._entry_synced = True
        return number

    def record_deletion(self, number: int) -> None:
        """Durably remember that names up to ``number`` were used (cleanup, under the lock).

        Called before cleanup unlinks any artifact, with the highest number it
        may delete; a no-op when the record already covers it.
        """
        fs = self._fs
        try:
            created = False
            try:
                facts = fs.lstat(self._deleted_path)
            except FileNotFoundError:
                created = True
            else:
                if facts.is_symlink or not facts.is_regular:
                    raise CorruptStateError(f"{DELETED_NAME} is not a regular file (S6, S7)")
            try:
                handle = fs.open_append(self._deleted_path, 0o600)
            except HardLinkedFileError as exc:  # the append could land outside the session
                raise CorruptStateError(f"{DELETED_NAME} is not written: {exc.strerror}") from exc
            try:
                last, complete_end, size = _last_number(fs, handle, DELETED_NAME)
                if last >= number:
                    return
                if complete_end < size:  # a torn line never reached its fsync
                    fs.ftruncate(handle, complete_end)
                fs.write(handle, b"%d\n" % number)
                fs.fsync(handle)
            finally:
                fs.close(handle)
            if created:
                fs.fsync_dir(self._root)
        except OSError as exc:
            raise EnvironmentFailure(
                f"cannot write {DELETED_NAME}: {exc.strerror or type(exc).__name__}"
            ) from exc

    def _reconstruct(self) -> int:
        """The largest name any durable source remembers; fail closed if one cannot be read."""
        return max(self._deleted(), self._claimed_in_journal())

    def _deleted(self) -> int:
        fs = self._fs
        try:
            handle = fs.open_read(self._deleted_path)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise CorruptStateError(
                f"{HIGH_WATER_NAME} is missing and {DELETED_NAME} cannot be read "
                f"({exc.strerror or type(exc).__name__}): refusing to guess the next "
                "artifact name"
            ) from exc
        try:
            return _last_number(fs, handle, DELETED_NAME)[0]
        except OSError as exc:
            raise CorruptStateError(
                f"{HIGH_WATER_NAME} is missing and {DELETED_NAME} cannot be read "
                f"({exc.strerror or type(exc).__name__})"
            ) from exc
        finally:
            fs.close(handle)

    def _claimed_in_journal(self) -> int:
        from .journal import ArtifactRetentionJournal
        from .journal_anchor import JournalAnchor

        try:
            journal = ArtifactRetentionJournal(
                self._root,
                fs=self._fs,
                session_id=self._paths.session_id,
                _caller_holds_lock=True,
            )
            if not journal.exists() and JournalAnchor(self._paths, self._fs).expected():
                raise CorruptStateError("the lease journal is gone, but its anchor says it existed")
        except CorruptStateError as exc:
            raise CorruptStateError(
                f"{HIGH_WATER_NAME} is missing and cannot be reconstructed, because the "
                f"names the lease journal claims cannot be trusted ({exc}); restore "
                f"{HIGH_WATER_NAME} with a number at least as high as any artifact "
                "name ever used"
            ) from exc
        # compacted history included: the snapshot's artifact_high_water and the tail's intents
        return journal.claimed_artifact_high_water()

    def _read_and_repair(self, handle: int) -> int:
        fs = self._fs
        mark, complete_end, size = _last_number(fs, handle, HIGH_WATER_NAME)
        if complete_end < size:
            # Torn append: its fsync never returned, so its name was never created.
            fs.ftruncate(handle, complete_end)
            fs.fsync(handle)
        return mark


def _last_number(fs: FileSystem, handle: int, name: str) -> tuple[int, int, int]:
    """(last complete number or 0, end of the last complete line, size) of a number file."""
    facts = fs.fstat(handle)
    if facts.nlink > 1:  # the write opens refuse one too; this covers the reads
        raise CorruptStateError(f"{name} is not used: {hard_link_message(facts.nlink)} (S6, S7)")
    size = facts.size
    start = max(0, size - _TAIL_BYTES)
    tail = fs.pread(handle, size - start, start)
    complete_end = tail.rfind(b"\n") + 1
    lines = tail[:complete_end].split(b"\n")[:-1]
    # From mid-file the first piece may be a fragment; only whole lines count.
    if start > 0 and len(lines) < 2:
        raise CorruptStateError(f"{name}: last line is too long")
    mark = 0
    if lines:
        line = lines[-1]
        if not line.isdigit() or line.startswith(b"0"):
            raise CorruptStateError(f"{name}: last line {line[:20]!r} is not a number")
        mark = int(line)
    return mark, start + complete_end, size
