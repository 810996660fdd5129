"""inagg.fmnist - Fashion-MNIST from its IDX files (Debian: apt-get install dataset-fashion-mnist,
which puts them in /usr/share/datasets/fashion-mnist), read locally: nothing is downloaded.

    from inagg import fmnist
    train_x, train_y, test_x, test_y = fmnist.load()      # uint8 arrays, (N, 28, 28) and (N,)

The directory is `root`, else $INAGG_FMNIST_DIR, else DEFAULT_DIR. Each file may be gzipped
(NAME.gz, as Debian ships them) or not (NAME). A file that is missing, truncated, or not an IDX
file of the expected kind raises DatasetError naming the file and what is wrong with it.
"""
import gzip
import os
import struct
import zlib

import numpy as np

__all__ = ["DEFAULT_DIR", "FILES", "DatasetError", "read_idx", "find", "load"]

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
_IDX_UBYTE = 0x08  # IDX type code of unsigned bytes: the only one Fashion-MNIST uses


class DatasetError(RuntimeError):
    """A dataset file that is missing, truncated or malformed; .path names it."""

    def __init__(self, path, why):
        self.path = path
        super().__init__("%s: %s" % (path, why))


def _read_all(path):
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise DatasetError(path, "no such file") from None
    except EOFError:
        raise DatasetError(path, "truncated (the gzip stream ends early)") from None
    except (OSError, zlib.error) as e:
        raise DatasetError(path, "cannot be read: %s" % e) from None


def read_idx(path, ndim):
    """The IDX file `path` (gzip or not) of unsigned bytes with `ndim` dimensions, as a numpy
    uint8 array. Raises DatasetError when it is missing, truncated or of another kind."""
    data = _read_all(path)
    head = 4 + 4 * ndim
    if len(data) < head:
        raise DatasetError(path, "truncated: %d bytes, shorter than the IDX header" % len(data))
    zero, kind, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != _IDX_UBYTE or dims != ndim:
        raise DatasetError(path, "not an IDX file of %d-dimensional unsigned bytes (magic %s)"
                           % (ndim, data[:4].hex()))
    shape = struct.unpack(">%dI" % ndim, data[4:head])
    want = int(np.prod(shape, dtype=np.int64))
    have = len(data) - head
    if have < want:
        raise DatasetError(path, "truncated: %d of %d data bytes for shape %s"
                           % (have, want, "x".join(map(str, shape))))
    if have > want:
        raise DatasetError(path, "%d bytes more than shape %s holds"
                           % (have - want, "x".join(map(str, shape))))
    return np.frombuffer(data, dtype=np.uint8, offset=head).reshape(shape)


def find(root, name):
    """The path of IDX file `name` under root: NAME.gz if it exists, else NAME; None if
    neither does."""
    for path in (os.path.join(root, name + ".gz"), os.path.join(root, name)):
        if os.path.exists(path):
            return path
    return None


def load(root=None):
    """(train_images, train_labels, test_images, test_labels): uint8 arrays (N, 28, 28) and
    (N,). Checks that images and labels agree in number and that labels are 0..9."""
    root = root or os.environ.get("INAGG_FMNIST_DIR") or DEFAULT_DIR
    if not os.path.isdir(root):
        raise DatasetError(root, "no such directory (apt-get install dataset-fashion-mnist, "
                           "or set INAGG_FMNIST_DIR)")
    out = []
    for split in ("train", "test"):
        paths = []
        for kind in ("_images", "_labels"):
            name = FILES[split + kind]
            path = find(root, name)
            if path is None:
                raise DatasetError(os.path.join(root, name + ".gz"),
                                   "no such file (nor %s without .gz)" % name)
            paths.append(path)
        ipath, lpath = paths
        images = read_idx(ipath, 3)
        labels = read_idx(lpath, 1)
        if images.shape[1:] != (28, 28):
            raise DatasetError(ipath, "images are %dx%d, not 28x28" % images.shape[1:])
        if len(images) != len(labels):
            raise DatasetError(lpath, "%d labels for %d images in %s"
                               % (len(labels), len(images), ipath))
        if len(labels) and labels.max() > 9:
            raise DatasetError(lpath, "a label is %d; Fashion-MNIST has classes 0..9"
                               % labels.max())
        out += [images, labels]
    return tuple(out)
