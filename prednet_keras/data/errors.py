"""The one exception type of the data layer."""


class DataError(ValueError):
    """A data source, dataset file or argument that cannot be used.

    The message names the file (where there is one) and the problem, and is
    meant to be shown to the user as it is. It subclasses ValueError so that
    callers who only know "bad value" still catch it.
    """
