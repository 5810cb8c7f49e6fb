"""The imagefolder format: one folder of PNG or JPEG images per class, read with Pillow."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from src.scaffold.data.formats import SPLITS, Reader, reader, unwrap
from src.scaffold.data.splits import Split
from src.scaffold.errors import DatasetError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def _class_folders(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))


@reader("imagefolder")
class ImageFolderReader(Reader):
    looks_for = "an image folder (train/ and test/ of class folders of .png/.jpg, or class folders)"

    def _roots(self, directory: Path) -> dict[str, Path]:
        directory = unwrap(directory)
        named = {s: directory / s for s in SPLITS if (directory / s).is_dir()}
        return named if "train" in named else {"all": directory}

    def found(self, directory: Path) -> str | None:
        roots = self._roots(directory)
        classes = _class_folders(next(iter(roots.values())))
        if not any(p.suffix.lower() in IMAGE_SUFFIXES for c in classes for p in c.iterdir()):
            return None
        parts = "/, ".join(roots) + "/" if "all" not in roots else "one folder"
        return f"{len(classes)} class folders of images in {parts}"

    def read(self, directory: Path) -> dict[str, Split]:
        size = self.options.get("resize")
        resize = None if size is None else tuple(size)  # type: ignore[arg-type]
        return {name: _image_split(root, resize) for name, root in self._roots(directory).items()}


def folder_listing(root: Path) -> tuple[list[Path], list[int], tuple[str, ...]]:
    """Images under root's class folders, their labels and the classes, as MindSpore orders them."""
    files: list[Path] = []
    labels: list[int] = []
    classes = _class_folders(root)
    if not classes:
        raise DatasetError(f"{root} holds no class folders (one folder of images per class)")
    for label, folder in enumerate(classes):
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
        if not entries:
            raise DatasetError(f"class folder {folder} is empty")
        for path in entries:
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                kinds = ", ".join(IMAGE_SUFFIXES)
                raise DatasetError(f"{path} is not an image ({kinds}); move it out of {folder}")
        files += entries
        labels += [label] * len(entries)
    return files, labels, tuple(c.name for c in classes)


def _image_split(root: Path, resize: tuple[int, int] | None) -> Split:
    """Every image under root's class folders, checked by header (none decoded yet)."""
    from PIL import Image  # only image data needs Pillow

    files, labels, classes = folder_listing(root)
    sizes: dict[tuple[int, int], Path] = {}
    modes = set()
    plain_png = True  # every file a .png of 8-bit pixels stored in the mode Pillow reads
    for path in files:
        try:
            with Image.open(path) as image:
                sizes.setdefault(image.size, path)
                modes.add(image.mode)
                stored = image.tile[0][3] if image.tile else None  # as stored: no palette, alpha...
                plain = image.mode in ("RGB", "L") and stored == image.mode
                plain_png = plain_png and path.suffix == ".png" and image.format == "PNG" and plain
        except (OSError, SyntaxError) as err:
            raise DatasetError(f"{path} cannot be read as an image: {_reason(err)}") from err
    if len(sizes) > 1 and resize is None:
        (a, first), (b, other) = list(sizes.items())[:2]
        raise DatasetError(
            f"images of different sizes: {first} is {a[0]}x{a[1]}, {other} is {b[0]}x{b[1]}; "
            "set data.resize: [height, width]"
        )
    width, height = next(iter(sizes)) if resize is None else (resize[1], resize[0])
    mode = "L" if modes <= {"L", "1", "I;16", "I", "F"} else "RGB"
    shape = (1 if mode == "L" else 3, height, width)
    as_is = plain_png and modes == {mode} and resize is None
    decode = ImageDecoder(mode, (width, height) if resize is not None else None, as_is)
    labelled = np.asarray(labels, dtype=np.int64)
    return Split(labelled, shape, files=tuple(files), decode=decode, classes=classes)


class ImageDecoder:
    """Decode one image file to uint8 (C, H, W) with Pillow; picklable, for loader processes.
    ``as_is``: .png files already in ``mode`` and size, which any PNG decoder reads alike."""

    def __init__(self, mode: str, size: tuple[int, int] | None, as_is: bool = False) -> None:
        self.mode, self.size, self.as_is = mode, size, as_is

    def __call__(self, path: Path) -> np.ndarray:
        return self.read(path)[0]

    def read(self, path: Path) -> tuple[np.ndarray, str, tuple[int, int]]:
        """The pixels, and the file's own mode and size (width, height) before conversion."""
        from PIL import Image, JpegImagePlugin, PngImagePlugin

        try:
            with open(path, "rb") as file:
                data = io.BytesIO(file.read())
            # The suffix's plugin, from memory: Image.open's probing (done once, at the scan)
            # costs a tenth (32x32 RGB) to a third (28x28 grey) of a small PNG's decode.
            png, jpeg = PngImagePlugin.PngImageFile, JpegImagePlugin.JpegImageFile
            plugin = {".png": png, ".jpg": jpeg, ".jpeg": jpeg}.get(Path(path).suffix.lower())
            try:
                image = (plugin or Image.open)(data)
            except SyntaxError:  # the plugin's "not a PNG/JPEG file"
                image = Image.open(data)  # named for another format: let Pillow find it
            with image:
                mode, size = image.mode, image.size
                if image.mode != self.mode:
                    image = image.convert(self.mode)
                if self.size is not None and image.size != self.size:
                    image = image.resize(self.size, Image.BILINEAR)
                pixels = np.asarray(image)
        except (OSError, SyntaxError, ValueError) as err:  # a truncated or damaged file
            raise DatasetError(f"{path} cannot be read as an image: {_reason(err)}") from err
        if pixels.ndim == 2:
            return pixels[None], mode, size
        return np.ascontiguousarray(pixels.transpose(2, 0, 1)), mode, size


def _reason(err: BaseException) -> str:
    """Pillow's reason, without the in-memory object it names for a file it cannot identify."""
    if type(err).__name__ == "UnidentifiedImageError":
        return "it is no image format Pillow reads"
    return " ".join(str(err).split()) or type(err).__name__
