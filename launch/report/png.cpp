// PNG: chunks with CRC-32 and a zlib stream from zlib1g; the plot draws with plain pixel ops.
#include "launch/report/png.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace braid {

namespace {

void put_be32(std::string& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((v >> s) & 0xFF);
}

// length, type, data, CRC-32 of type + data.
void put_chunk(std::string& out, const char type[5], const std::string& data) {
  put_be32(out, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  out += body;
  put_be32(out, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(body.data()),
                                            static_cast<uInt>(body.size()))));
}

// 3x5 glyphs, one row per entry, bit 2 = leftmost column.
struct Glyph {
  char c;
  uint8_t rows[5];
};
constexpr Glyph kFont[] = {
    {'0', {7, 5, 5, 5, 7}}, {'1', {2, 6, 2, 2, 7}}, {'2', {7, 1, 7, 4, 7}}, {'3', {7, 1, 7, 1, 7}},
    {'4', {5, 5, 7, 1, 1}}, {'5', {7, 4, 7, 1, 7}}, {'6', {7, 4, 7, 5, 7}}, {'7', {7, 1, 1, 1, 1}},
    {'8', {7, 5, 7, 5, 7}}, {'9', {7, 5, 7, 1, 7}}, {'.', {0, 0, 0, 0, 2}}, {'-', {0, 0, 7, 0, 0}},
    {'+', {0, 2, 7, 2, 0}}, {'e', {0, 7, 7, 4, 7}},
};

uint32_t parse_color(const std::string& css) {
  if (css.size() == 7 && css[0] == '#')
    return static_cast<uint32_t>(std::stoul(css.substr(1), nullptr, 16));
  return 0x000000;
}

}  // namespace

Image::Image(int w, int h) : width(w), height(h), rgb(static_cast<size_t>(w) * h * 3, 0xFF) {
  BRAID_CHECK(w > 0 && h > 0 && w <= 16384 && h <= 16384, "image size {}x{}", w, h);
}

void Image::set(int x, int y, uint32_t c) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
  p[0] = static_cast<uint8_t>(c >> 16);
  p[1] = static_cast<uint8_t>(c >> 8);
  p[2] = static_cast<uint8_t>(c);
}

void Image::fill(int x0, int y0, int x1, int y1, uint32_t c) {
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) set(x, y, c);
}

void Image::line(double x0, double y0, double x1, double y1, uint32_t c, int thickness) {
  const int n = static_cast<int>(std::ceil(std::max(std::abs(x1 - x0), std::abs(y1 - y0)))) + 1;
  for (int i = 0; i <= n; ++i) {
    const double t = static_cast<double>(i) / n;
    const int x = static_cast<int>(std::lround(x0 + (x1 - x0) * t));
    const int y = static_cast<int>(std::lround(y0 + (y1 - y0) * t));
    fill(x - thickness / 2, y - thickness / 2, x - thickness / 2 + thickness,
         y - thickness / 2 + thickness, c);
  }
}

void Image::text(int x, int y, const std::string& s, uint32_t c, int scale) {
  for (char ch : s) {
    for (const Glyph& g : kFont) {
      if (g.c != ch) continue;
      for (int r = 0; r < 5; ++r)
        for (int col = 0; col < 3; ++col)
          if (g.rows[r] & (4 >> col))
            fill(x + col * scale, y + r * scale, x + (col + 1) * scale, y + (r + 1) * scale, c);
    }
    x += 4 * scale;
  }
}

std::string encode_png(const Image& img) {
  std::string raw;
  raw.reserve(static_cast<size_t>(img.height) * (1 + img.width * 3));
  for (int y = 0; y < img.height; ++y) {
    raw += '\0';  // filter type 0 (none)
    raw.append(reinterpret_cast<const char*>(&img.rgb[static_cast<size_t>(y) * img.width * 3]),
               static_cast<size_t>(img.width) * 3);
  }
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::string z(zlen, '\0');
  const int rc =
      compress2(reinterpret_cast<Bytef*>(z.data()), &zlen,
                reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), 9);
  BRAID_CHECK(rc == Z_OK, "zlib compress2 failed ({})", rc);
  z.resize(zlen);

  std::string ihdr;
  put_be32(ihdr, static_cast<uint32_t>(img.width));
  put_be32(ihdr, static_cast<uint32_t>(img.height));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, filter 0, no interlace
  std::string out("\x89PNG\r\n\x1a\n", 8);
  put_chunk(out, "IHDR", ihdr);
  put_chunk(out, "IDAT", z);
  put_chunk(out, "IEND", "");
  return out;
}

Image plot_lines_png(const std::vector<ChartLine>& lines, int width, int height) {
  Image img(width, height);
  const int left = 80, right = 20, top = 20, bottom = 40;
  const int pw = width - left - right, ph = height - top - bottom;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const ChartLine& l : lines)
    for (const auto& [x, y] : l.points) {
      xlo = std::min(xlo, x), xhi = std::max(xhi, x), ylo = std::min(ylo, y),
      yhi = std::max(yhi, y);
    }
  img.line(left, top, left, top + ph, 0x999999);
  img.line(left, top + ph, left + pw, top + ph, 0x999999);
  if (!(xlo <= xhi)) return img;  // nothing to plot: empty axes
  if (xhi == xlo) xhi = xlo + 1;
  if (yhi - ylo <= std::abs(yhi) * 1e-9) {
    const double d = yhi == 0 ? 1.0 : std::abs(yhi) * 0.05;
    ylo -= d, yhi += d;
  }
  auto px = [&](double x) { return left + (x - xlo) / (xhi - xlo) * pw; };
  auto py = [&](double y) { return top + ph - (y - ylo) / (yhi - ylo) * ph; };
  for (double t : nice_ticks(ylo, yhi, 5)) {
    img.line(left, py(t), left + pw, py(t), 0xE5E5E5);
    const std::string lab = tick_label(t);
    img.text(left - 8 - static_cast<int>(lab.size()) * 8, static_cast<int>(py(t)) - 5, lab,
             0x444444);
  }
  for (double t : nice_ticks(xlo, xhi, 6)) {
    img.line(px(t), top, px(t), top + ph, 0xE5E5E5);
    const std::string lab = tick_label(t);
    img.text(static_cast<int>(px(t)) - static_cast<int>(lab.size()) * 4, top + ph + 8, lab,
             0x444444);
  }
  img.line(left, top, left, top + ph, 0x999999);
  img.line(left, top + ph, left + pw, top + ph, 0x999999);
  int legend_y = top + 8;
  for (const ChartLine& l : lines) {
    if (l.points.empty()) continue;
    const uint32_t c = parse_color(l.color);
    for (size_t i = 1; i < l.points.size(); ++i)
      img.line(px(l.points[i - 1].first), py(l.points[i - 1].second), px(l.points[i].first),
               py(l.points[i].second), c, 2);
    if (l.points.size() == 1)
      img.fill(static_cast<int>(px(l.points[0].first)) - 2,
               static_cast<int>(py(l.points[0].second)) - 2,
               static_cast<int>(px(l.points[0].first)) + 3,
               static_cast<int>(py(l.points[0].second)) + 3, c);
    img.fill(left + pw - 40, legend_y, left + pw - 10, legend_y + 4,
             c);  // legend swatch, order as in the HTML
    legend_y += 10;
  }
  return img;
}

}  // namespace braid
