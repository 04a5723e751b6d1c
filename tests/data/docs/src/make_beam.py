"""Draw src/beam.png: a small bar chart titled BEAM RANGE (Pillow only)."""
from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
img = Image.new("RGB", (400, 200), "white")
d = ImageDraw.Draw(img)
title = ImageFont.truetype(FONT, 30)
small = ImageFont.truetype(FONT, 12)
d.text((200, 8), "BEAM RANGE", font=title, fill="black", anchor="ma")
# beam range in nautical miles (illustrative)
bars = [("Skerryvore", 18), ("Bell Rock", 18), ("Muckle F.", 22), ("Ardnam.", 18)]
base, x = 180, 30
for name, val in bars:
    h = val * 5
    d.rectangle([x, base - h, x + 60, base], fill=(40, 90, 160), outline="black")
    d.text((x + 30, base + 3), name, font=small, fill="black", anchor="ma")
    x += 90
d.line([20, base, 385, base], fill="black", width=2)
img.save("beam.png", optimize=True)
