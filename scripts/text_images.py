"""Rendered document images for the OCR and layout models of `real-networks.py`.

The packages ship no test images and none can be downloaded here, and on random images a
text-direction classifier sits near 0.5 and a text detector sees no text, so agreement
measured on them says little. These are the inputs the models were trained for, made with
Pillow's built-in font (the same pixels on every machine with the same Pillow): text lines
(upright, or turned 180 degrees for the direction classifier) and pages with a title,
paragraphs, a figure and a table. Seeded by the caller's generator.
"""
import numpy as np
from PIL import Image, ImageDraw, ImageFont

WORDS = ("the of and invoice total amount date 2026 page table figure section results "
         "accelerator tensor network layer model input output quantized integer memory "
         "buffer cycle clock board open source report summary method data value 42 3.14 "
         "No. Name Address Phone ID TOTAL Hello World OCR text line recognition").split()
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]


def _font(size):
    return ImageFont.load_default(size=size)


def _words(rng, n):
    return " ".join(rng.choice(WORDS, n))


def _line(rng, h, w, flip):
    """One text line of dark ink on a light background, the text as high as in a detector's
    crop (about two thirds of the line)."""
    size = int(rng.integers(h * 11 // 20, h * 3 // 4))
    bg, fg = int(rng.integers(180, 256)), int(rng.integers(0, 80))
    img = Image.new("L", (w, h), bg)
    ImageDraw.Draw(img).text((int(rng.integers(0, w // 24)), (h - size) // 2 - size // 8),
                             _words(rng, int(rng.integers(2, 5))), fill=fg, font=_font(size))
    a = np.asarray(img, np.float32)
    return a[::-1, ::-1] if flip else a


def _page(rng, h, w):
    """A page: a title, paragraphs of text lines, a figure and a ruled table."""
    img = Image.new("L", (w, h), int(rng.integers(225, 256)))
    d = ImageDraw.Draw(img)
    margin, y = w // 12, h // 20
    title = max(16, h // 20)
    d.text((margin, y), _words(rng, 3).title(), fill=0, font=_font(title))
    y += title * 2
    body = max(12, h // 50)
    while y < h - body * 3:
        block = rng.choice(["text", "text", "figure", "table"])
        if block == "text":
            for _ in range(int(rng.integers(2, 6))):
                if y >= h - body * 2:
                    break
                d.text((margin, y), _words(rng, int(rng.integers(4, 9))), fill=20,
                       font=_font(body))
                y += body * 3 // 2
        elif block == "figure":
            fh = int(rng.integers(h // 10, h // 5))
            d.rectangle([margin, y, w - margin, min(h - 1, y + fh)], fill=150, outline=60)
            y += fh + body
        else:
            rows, cols = int(rng.integers(2, 5)), int(rng.integers(2, 5))
            cw, rh = (w - 2 * margin) // cols, body * 2
            for r in range(rows):
                for c in range(cols):
                    box = [margin + c * cw, y + r * rh, margin + (c + 1) * cw, y + (r + 1) * rh]
                    if box[3] < h:
                        d.rectangle(box, outline=0)
                        d.text((box[0] + 2, box[1] + 2), _words(rng, 1), fill=0,
                               font=_font(body))
            y += rows * rh + body
        y += body
    return np.asarray(img, np.float32)


def _rgb(gray):
    return np.repeat(gray[None] / 255, 3, axis=0)


def text_lines(rng, n, shape, flip_half=False):
    """`n` text lines, `shape` = [1, 3, H, W], scaled to [-1, 1] as PP-OCR's classifier and
    recognizer expect; with `flip_half`, every other one turned 180 degrees."""
    h, w = shape[2], shape[3]
    return np.stack([(_rgb(_line(rng, h, w, flip_half and i % 2 == 1)) - 0.5) / 0.5
                     for i in range(n)]).astype(np.float32)


def pages(rng, n, shape):
    """`n` document pages, `shape` = [1, 3, H, W], with ImageNet's mean and deviation taken
    out, as PP-OCR's detector and the layout detector expect."""
    h, w = shape[2], shape[3]
    return np.stack([(_rgb(_page(rng, h, w)) - IMAGENET_MEAN) / IMAGENET_STD
                     for _ in range(n)]).astype(np.float32)
