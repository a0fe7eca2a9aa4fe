"""One progress bar for the long loops driven from Python: the command line's simulation,
identification, trajectory optimisation and animation. tqdm when it is installed (the ``plot``
extra); otherwise plain lines on stderr: one line rewritten in place on a terminal, a line per
quarter of the run in a log. (``simulate`` reports from inside its jitted loop through
diffrax's progress meters instead.)"""

from __future__ import annotations

import sys


class Progress:
    """A bar over ``total`` units of work named ``desc``; silent with ``enabled=False``.

    ``update(n, text)`` advances it by ``n`` units and shows ``text`` (e.g. the current loss)
    beside it; ``close()`` (or leaving a ``with`` block) removes it.
    """

    def __init__(self, total: int, desc: str, unit: str = "it", enabled: bool = True):
        self.total, self.desc, self.unit, self.enabled = max(int(total), 1), desc, unit, enabled
        self.done, self.bar, self.tty = 0, None, sys.stderr.isatty()
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=self.total, desc=desc, unit=unit, file=sys.stderr, leave=False)

    def update(self, n: int = 1, text: str = ""):
        before, self.done = self.done, min(self.done + max(int(n), 0), self.total)
        if not self.enabled:
            return
        if self.bar is not None:
            if text:
                self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(self.done - before)
            return
        line = f"  {self.desc}: {self.done}/{self.total} {self.unit}" + (f", {text}" if text else "")
        if self.tty:
            sys.stderr.write("\r" + line)
            sys.stderr.flush()
        elif 4 * self.done // self.total > 4 * before // self.total:
            print(line, file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.tty and self.done:
            sys.stderr.write("\r" + " " * 100 + "\r")
            sys.stderr.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
