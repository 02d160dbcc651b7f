"""Table model and its two renderings: Markdown (report.md) and LaTeX (booktabs)."""

DASH = "-"


class Cell:
    """A rendered value; `value` and `low` keep the numbers behind the text (median, min)."""

    def __init__(self, text, value=None, low=None, n=0):
        self.text = text
        self.value = value
        self.low = low
        self.n = n  # how many measurements the value summarizes

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"Cell({self.text!r})"


def as_cell(x):
    return x if isinstance(x, Cell) else Cell(str(x))


class Table:
    """A titled table: `stub` columns name the row (e.g. K), the others are data columns."""

    def __init__(self, name, title, stub, columns, notes=()):
        self.name = name  # file stem: tables/<name>.md, .tex
        self.title = title
        self.stub = list(stub)
        self.columns = list(columns)
        self.rows = []  # (row key tuple, [Cell per data column])
        self.notes = list(notes)

    def add_row(self, key, cells):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != len(self.stub) or len(cells) != len(self.columns):
            raise ValueError(f"{self.name}: row {key} does not fit {self.stub} + {self.columns}")
        self.rows.append((key, [as_cell(c) for c in cells]))

    def cell(self, key, column):
        """The cell of row `key` (a value or a tuple of stub values) in data column `column`."""
        key = key if isinstance(key, tuple) else (key,)
        j = self.columns.index(column)
        for k, cells in self.rows:
            if k == key:
                return cells[j]
        raise KeyError(f"{self.name}: no row {key}")

    def header(self):
        return self.stub + self.columns

    def body(self):
        return [[str(k) for k in key] + [c.text for c in cells] for key, cells in self.rows]

    def to_markdown(self):
        def line(items):
            return "| " + " | ".join(str(i).replace("|", "\\|") for i in items) + " |"

        align = ["---"] * len(self.stub) + ["---:"] * len(self.columns)
        out = [f"**{self.title}**", "", line(self.header()), "| " + " | ".join(align) + " |"]
        out += [line(r) for r in self.body()]
        if self.notes:
            out.append("")
            out += [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def to_latex(self):
        spec = "l" * len(self.stub) + "r" * len(self.columns)
        out = ["% moefin report table: " + self.name, r"\begin{table}[ht]", r"\centering",
               r"\caption{" + latex_escape(self.title) + "}",
               r"\label{tab:" + self.name.replace("_", "-") + "}", r"\small",
               r"\begin{tabular}{" + spec + "}", r"\toprule",
               " & ".join(latex_escape(h) for h in self.header()) + r" \\", r"\midrule"]
        out += [" & ".join(latex_escape(c) for c in r) + r" \\" for r in self.body()]
        out += [r"\bottomrule", r"\end{tabular}"]
        for n in self.notes:
            out.append(r"\par\smallskip{\footnotesize " + latex_escape(n) + "}")
        out.append(r"\end{table}")
        return "\n".join(out) + "\n"


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
          "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
          "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}


def latex_escape(text):
    return "".join(_LATEX.get(ch, ch) for ch in str(text))


def speedup_text(median, low=None):
    """The seed's format: '1.29x (1.15x)'."""
    if median is None:
        return DASH
    return f"{median:.2f}x" + (f" ({low:.2f}x)" if low is not None else "")


def ratio_text(value, digits=3):
    return DASH if value is None else f"{value:.{digits}f}x"


def number_text(value):
    """Two decimals, or three significant digits below 0.1 (a byte floor of 0.0005 us is not
    0.00)."""
    return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.3g}"


def time_text(median, low=None):
    if median is None:
        return DASH
    return number_text(median) + (f" ({number_text(low)})" if low is not None else "")
