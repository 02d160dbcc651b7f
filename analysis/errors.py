"""The one error class of the package: a file that cannot be used, named in one line."""


class ResultFileError(Exception):
    """A missing, unreadable, non-HDF5, foreign, truncated or malformed input file.

    str(error) is the single line the command prints: "PATH: what is wrong".
    """

    def __init__(self, path, what):
        super().__init__(f"{path}: {what}")
        self.path = str(path)
        self.what = what
