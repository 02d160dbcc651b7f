"""A minimal column table (numpy arrays by name, raw samples per row), enough for the report.

Kept to numpy so that the package runs wherever h5py and matplotlib do.
"""
import numpy as np


class Frame:
    def __init__(self, columns, samples=None):
        self.columns = {k: np.asarray(v) for k, v in columns.items()}
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        self.n = lengths.pop() if lengths else 0
        self.samples = list(samples) if samples is not None else [np.empty(0)] * self.n
        if len(self.samples) != self.n:
            raise ValueError("one sample array per row is needed")

    def __len__(self):
        return self.n

    def __contains__(self, name):
        return name in self.columns

    def __getitem__(self, name):
        return self.columns[name]

    def mask(self, **equal):
        """Rows whose column c equals v for every c=v given."""
        m = np.ones(self.n, dtype=bool)
        for c, v in equal.items():
            m &= self.columns[c] == v
        return m

    def take(self, mask):
        idx = np.flatnonzero(mask)
        return Frame({k: v[idx] for k, v in self.columns.items()},
                     [self.samples[i] for i in idx])

    def where(self, **equal):
        return self.take(self.mask(**equal))

    def unique(self, name):
        return sorted(set(self.columns[name].tolist()))

    def rows(self):
        """Row dictionaries (plain Python values), in order."""
        names = list(self.columns)
        for i in range(self.n):
            yield {c: self.columns[c][i].item() if hasattr(self.columns[c][i], "item")
                   else self.columns[c][i] for c in names}

    @staticmethod
    def concat(frames):
        """Rows of all frames; the columns are those every frame has."""
        frames = [f for f in frames if f is not None]
        if not frames:
            return Frame({})
        names = [c for c in frames[0].columns if all(c in f.columns for f in frames)]
        cols = {}
        for c in names:
            parts = [f.columns[c] for f in frames]
            if any(p.dtype.kind == "U" for p in parts):
                parts = [p.astype(str) for p in parts]
            cols[c] = np.concatenate(parts)
        samples = [s for f in frames for s in f.samples]
        return Frame(cols, samples)
