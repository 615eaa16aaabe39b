"""MNIST: the embedded copy is the genuine set; users' copies load the same way."""

import gzip

import numpy as np
import pytest

from prednet_keras.data import DataError, embedded_mnist_path, load_mnist, read_idx

TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def pixel_mean_std(images):
    """Mean and std of images / 255, exactly, from the histogram of byte values."""
    counts = np.bincount(images.ravel(), minlength=256)
    values = np.arange(256) / 255.0
    mean = (counts * values).sum() / counts.sum()
    return mean, np.sqrt((counts * (values - mean) ** 2).sum() / counts.sum())


@pytest.fixture(scope="module")
def mnist():
    return load_mnist()


def test_embedded_mnist_is_the_genuine_set(mnist):
    (x_train, y_train), (x_test, y_test) = mnist
    assert x_train.shape == (60000, 28, 28) and x_test.shape == (10000, 28, 28)
    assert x_train.dtype == y_train.dtype == np.uint8
    assert np.bincount(y_train).tolist() == TRAIN_COUNTS
    assert np.bincount(y_test).tolist() == TEST_COUNTS
    assert y_train[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert y_test[:5].tolist() == [7, 2, 1, 0, 4]
    mean, std = pixel_mean_std(x_train)
    assert round(mean, 4) == 0.1307
    assert round(std, 4) == 0.3081


def idx_bytes(array):
    code = {np.dtype(np.uint8): 0x08}[array.dtype]
    header = bytes([0, 0, code, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.tobytes()


def write_idx_folder(folder, mnist, compress, dotted=False):
    (x_train, y_train), (x_test, y_test) = mnist
    folder.mkdir()
    parts = {
        "train-images-idx3-ubyte": x_train[:50],
        "train-labels-idx1-ubyte": y_train[:50],
        "t10k-images-idx3-ubyte": x_test[:20],
        "t10k-labels-idx1-ubyte": y_test[:20],
    }
    paths = []
    for name, array in parts.items():
        if dotted:
            name = name.replace("-idx", ".idx")
        data = idx_bytes(array)
        path = folder / (name + (".gz" if compress else ""))
        path.write_bytes(gzip.compress(data) if compress else data)
        paths.append(path)
    return paths


@pytest.mark.parametrize("compress, dotted", [(False, False), (True, False), (False, True)])
def test_idx_folders(tmp_path, mnist, compress, dotted):
    write_idx_folder(tmp_path / "idx", mnist, compress, dotted)
    (x_train, y_train), (x_test, y_test) = load_mnist(tmp_path / "idx")
    np.testing.assert_array_equal(x_train, mnist[0][0][:50])
    np.testing.assert_array_equal(y_test, mnist[1][1][:20])


def test_idx_paths_and_keras_npz(tmp_path, mnist):
    paths = write_idx_folder(tmp_path / "idx", mnist, compress=True)
    (x_train, _), _ = load_mnist(paths)
    np.testing.assert_array_equal(x_train, mnist[0][0][:50])
    np.savez(tmp_path / "mnist.npz", x_train=x_train, y_train=mnist[0][1][:50],
             x_test=mnist[1][0][:20], y_test=mnist[1][1][:20])
    (_, y_train), (x_test, _) = load_mnist(tmp_path / "mnist.npz")
    assert y_train[:3].tolist() == [5, 0, 4] and x_test.shape == (20, 28, 28)


def test_bad_mnist_inputs(tmp_path, mnist):
    bad = tmp_path / "train-images-idx3-ubyte"
    bad.write_bytes(b"PK\x03\x04 a zip, not IDX")
    with pytest.raises(DataError, match="not an IDX file"):
        read_idx(bad)
    truncated = tmp_path / "short-idx1-ubyte"
    truncated.write_bytes(idx_bytes(np.arange(10, dtype=np.uint8))[:-3])
    with pytest.raises(DataError, match="holds 7 bytes"):
        read_idx(truncated)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no train-images-idx"):
        load_mnist(tmp_path / "empty")
    np.savez(tmp_path / "other.npz", images=np.zeros(3))
    with pytest.raises(DataError, match="missing x_train"):
        load_mnist(tmp_path / "other.npz")


def test_embedded_mnist_is_keras_layout():
    with np.load(embedded_mnist_path()) as archive:
        assert sorted(archive.files) == ["x_test", "x_train", "y_test", "y_train"]
