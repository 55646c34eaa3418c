"""One kind of error for bad input: a problem and its fix, printed as one line by the CLI (exit status 2)."""


class UserError(Exception):
    """Bad input from the user. `str(err)` is one line: what is wrong, then what to do about it, in the words of the
    Python call (its arguments). `cli`, where given, is the same fix in the words of the command line (its flags):
    `for_cli()` is what `frontier` prints."""

    def __init__(self, problem: str, fix: str, cli: str | None = None):
        self.problem = problem
        self.fix = fix
        self.cli = cli
        super().__init__(f"{problem}; {fix}")

    def for_cli(self) -> str:
        return f"{self.problem}; {self.cli or self.fix}"
