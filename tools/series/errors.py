"""One exception type for every user-facing failure of the series tooling."""


class SeriesError(Exception):
    """A failure with a message that tells the user what happened and what to do.

    The CLI prints ``error: <message>`` and exits with status 1; no traceback.
    """
