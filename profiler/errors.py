"""The one exception type for users' errors, and its subclasses."""


class ScprofError(Exception):
    """A problem with the user's input (file, argument, store): exit code 2, one line."""


class TraceFormatError(ScprofError):
    """A trace file that is not a valid scprof trace (names the file and byte offset)."""


class TruncatedTraceError(TraceFormatError):
    """A trace that ends inside a chunk or without its footer (the recorder did not finish)."""


class StoreError(ScprofError):
    """The store cannot be opened or does not hold what was asked for."""


def one_line(e: BaseException | str) -> str:
    """An error's message on one line (DuckDB's and Arrow's span several): for a user's error
    line or a log line."""
    return " ".join(str(e).split())
