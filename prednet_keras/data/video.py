"""Frames from a video file, decoded with PyAV (FFmpeg bundled in its wheel), or OpenCV where PyAV is
missing; a video that decodes to fewer frames than its header declares is refused."""

import re

from prednet_keras.data.errors import DataError
from prednet_keras.data.source_base import Source

VIDEO_EXTENSIONS = (
    ".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv", ".flv", ".ogv", ".3gp",
)


def _video_decoder():
    """("pyav", module) or ("opencv", module): PyAV where installed, else OpenCV.

    PyAV is the project's decoder (a dependency). OpenCV is the fallback for
    machines that have it but not PyAV (the GPU machine); both bundle FFmpeg,
    but the two may convert colours differently by a grey level, so the
    decoder is recorded with every video source.
    """
    try:
        import av  # only video sources need it

        return "pyav", av
    except ImportError:
        pass
    try:
        import cv2

        return "opencv", cv2
    except ImportError:
        raise DataError("decoding video needs PyAV (pip install av) or OpenCV (pip install opencv-python-headless)") from None


def _stream_seconds(container, stream):
    """The video stream's duration in seconds as the file declares it, or None.

    Matroska keeps it in the stream's DURATION tag; the container's own
    duration is used only when the video is the only stream (an audio track
    may run longer).
    """
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    tag = re.fullmatch(r"(\d+):(\d+):(\d+(?:\.\d+)?)", (stream.metadata or {}).get("DURATION", "").strip())
    if tag:
        return int(tag.group(1)) * 3600 + int(tag.group(2)) * 60 + float(tag.group(3))
    if container.duration and len(container.streams) == 1:
        return container.duration / 1e6  # AV_TIME_BASE units
    return None


class Video(Source):
    """A video file, decoded with PyAV (FFmpeg bundled in its wheel), or OpenCV where PyAV is missing."""

    kind = "video"

    def __init__(self, path):
        super().__init__(path)
        self.decoder, self._module = _video_decoder()
        if self.decoder == "pyav":
            with self._open() as container:
                stream = container.streams.video[0]
                self.codec = stream.codec_context.name
                self.size = (stream.codec_context.height, stream.codec_context.width)
                self._frames = int(stream.frames or 0)
                rate = stream.average_rate
                self.fps = float(rate) if rate else None
                seconds = _stream_seconds(container, stream)
                by_duration = int(round(seconds * self.fps)) if seconds and self.fps else 0
                if not self._frames:
                    self._frames = by_duration
                # Either count can be off (a container's frame count field is
                # sometimes wrong; durations round), so a video is called
                # truncated only when it falls short of both.
                counts = [c for c in (int(stream.frames or 0), by_duration) if c > 0]
                self.declared = min(counts) if counts else None
        else:
            cv2 = self._module
            capture = self._open_opencv()
            try:
                fourcc = int(capture.get(cv2.CAP_PROP_FOURCC))
                self.codec = "".join(chr((fourcc >> 8 * i) & 0xFF) for i in range(4)).strip("\0 ").lower() or None
                self.size = (int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)), int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)))
                self._frames = max(int(capture.get(cv2.CAP_PROP_FRAME_COUNT)), 0)
                self.fps = float(capture.get(cv2.CAP_PROP_FPS)) or None
                self.declared = self._frames or None
            finally:
                capture.release()

    def _open(self):
        av = self._module
        try:
            container = av.open(str(self.path))
        except av.FFmpegError as exc:
            raise DataError(f"{self.path}: not a readable video (unknown format or damaged: {exc})") from None
        if not container.streams.video:
            container.close()
            raise DataError(f"{self.path}: no video stream in this file")
        stream = container.streams.video[0]
        if stream.codec_context is None:
            container.close()
            raise DataError(f"{self.path}: unknown video codec (no decoder for it in PyAV's bundled FFmpeg)")
        return container

    def _open_opencv(self):
        capture = self._module.VideoCapture(str(self.path))
        if not capture.isOpened():
            capture.release()
            raise DataError(f"{self.path}: not a readable video (OpenCV cannot open it: unknown format or damaged)")
        return capture

    def estimate(self):
        return self._frames or None

    def runs(self):
        yield str(self.path), self._decode() if self.decoder == "pyav" else self._decode_opencv()

    def _decode(self):
        av = self._module
        count = 0
        with self._open() as container:
            stream = container.streams.video[0]
            try:
                for frame in container.decode(stream):
                    yield frame.to_ndarray(format="rgb24"), f"{self.path} frame {count}"
                    count += 1
            except av.FFmpegError as exc:
                raise DataError(
                    f"{self.path}: truncated or damaged: decoding failed after {count} frames "
                    f"(codec {self.codec}: {exc}); refused"
                ) from None
        self._check_complete(count)

    def _decode_opencv(self):
        cv2 = self._module
        count = 0
        capture = self._open_opencv()
        try:
            while True:
                ok, frame = capture.read()
                if not ok:
                    break
                yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB), f"{self.path} frame {count}"
                count += 1
        finally:
            capture.release()
        self._check_complete(count)

    def _check_complete(self, count):
        """Refuses a video that decodes to clearly fewer frames than its header declares.

        A truncated file otherwise ends early without an error (Matroska,
        for one), and the frames lost are silently missing from the set.
        """
        if count == 0:
            raise DataError(f"{self.path}: no frames could be decoded (codec {self.codec})")
        if self.declared and count < self.declared - max(2, self.declared // 50):
            raise DataError(
                f"{self.path}: truncated or damaged: decoded {count} frames of the {self.declared} its "
                "header declares; refused (a video must decode to the frame count its header declares, "
                "within 2%)"
            )

    def describe(self, hash_files=True):
        record = super().describe(hash_files)
        version = getattr(self._module, "__version__", None)
        record.update(codec=self.codec, size=list(self.size), fps=self.fps, decoder=f"{self.decoder} {version}")
        return record
