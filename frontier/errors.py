"""One kind of error for bad input: a problem and its fix, printed as one line by the CLI (exit status 2)."""


class UserError(Exception):
    """Bad input from the user. `str(err)` is one line: what is wrong, then what to do about it."""

    def __init__(self, problem: str, fix: str):
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}; {fix}")
