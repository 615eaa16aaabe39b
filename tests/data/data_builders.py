"""Builders for the small inputs the data tests make for themselves."""

import av
import h5py
import numpy as np
from PIL import Image


def numbered_frames(count, height=12, width=16, channels=3, first=0):
    """Frames whose pixels say which frame they are: value = (10 * index + row + column + channel) % 256."""
    rows = np.arange(height)[:, None, None]
    cols = np.arange(width)[None, :, None]
    chans = np.arange(channels)[None, None, :]
    return np.stack(
        [((10 * i + rows + cols + chans) % 256).astype(np.uint8) for i in range(first, first + count)]
    )


def smooth_texture(seed, height, width):
    """A low-frequency random image (bilinear upsampling of coarse noise), (h, w, 3) float."""
    coarse = np.random.default_rng(seed).uniform(0, 255, (height // 8 + 2, width // 8 + 2, 3))
    image = Image.fromarray(coarse.astype(np.uint8)).resize((width + 64, height), Image.BILINEAR)
    return np.asarray(image).astype(np.float64)


def panning_scenes(lengths, height=48, width=64, step=2):
    """Scenes of a camera panning over a different smooth texture each: hard cuts between them."""
    frames = []
    for scene, length in enumerate(lengths):
        texture = smooth_texture(scene, height, width)
        for t in range(length):
            frames.append(texture[:, t * step : t * step + width].astype(np.uint8))
    return np.stack(frames)


def write_pngs(folder, frames, pattern="frame_{:d}.png"):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, frame in enumerate(frames):
        path = folder / pattern.format(i)
        Image.fromarray(frame[..., 0] if frame.shape[2] == 1 else frame).save(path)
        paths.append(path)
    return paths


def write_video(path, frames, codec="ffv1", pix_fmt="bgr0", fps=25, bit_rate=None):
    """Encodes frames with PyAV: ffv1/bgr0 is lossless, so decoded frames compare exactly."""
    height, width = frames.shape[1:3]
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        if bit_rate:
            stream.bit_rate = bit_rate
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def write_hickle_v2(path, obj):
    """The hickle 2.x/3.x layout: the object at /data_0, a 'type' attribute."""
    with h5py.File(path, "w") as handle:
        handle.attrs["CLASS"] = b"hickle"
        handle.attrs["VERSION"] = 2
        handle.attrs["type"] = [b"hickle"]
        if isinstance(obj, np.ndarray):
            handle.create_dataset("data_0", data=obj).attrs["type"] = [b"ndarray"]
        else:
            data = [s.encode("utf-8") if isinstance(s, str) else s for s in obj]
            handle.create_dataset("data_0", data=data).attrs["type"] = [b"<type 'list'>"]


def write_hickle_v5(path, obj):
    """The hickle 4.x/5.x layout: /data; a list of str is a group of per-item byte arrays."""
    with h5py.File(path, "w") as handle:
        handle.attrs["HICKLE_VERSION"] = "5.0.2"
        if isinstance(obj, np.ndarray):
            handle.create_dataset("data", data=obj).attrs["base_type"] = b"ndarray"
            return
        group = handle.create_group("data")
        group.attrs["base_type"] = b"list"
        group.attrs["num_items"] = len(obj)
        for i, item in enumerate(obj):
            raw = np.frombuffer(item.encode("utf-8"), dtype="S1").reshape(1, -1)
            item_set = group.create_dataset(f"data{i}", data=raw)
            item_set.attrs["str_type"] = b"str"
            item_set.attrs["item_index"] = i
            item_set.attrs["base_type"] = b"str"
