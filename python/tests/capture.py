"""Test helper shared by the client's tests: the client's stdout lines, captured."""

import io
import json

import drover


class Captured:
    """Redirects the client's stdout to a buffer."""

    def __enter__(self):
        self.buf = io.StringIO()
        self.old = drover._out
        drover._out = self.buf
        return self

    def __exit__(self, *exc):
        drover._out = self.old

    def lines(self):
        return [json.loads(l) for l in self.buf.getvalue().splitlines()]
