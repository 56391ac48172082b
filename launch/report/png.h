// A minimal PNG writer (8-bit RGB, no interlacing) and a raster line plot to put in it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launch/report/svg_chart.h"

namespace braid {

// An RGB image, row-major, 3 bytes per pixel.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  Image(int w, int h);
  void set(int x, int y, uint32_t color);  // 0xRRGGBB; pixels outside are ignored
  void line(double x0, double y0, double x1, double y1, uint32_t color, int thickness = 1);
  void fill(int x0, int y0, int x1, int y1, uint32_t color);
  // Digits, '.', '-', '+' and 'e' in a 3x5 pixel font scaled by `scale` (tick labels).
  void text(int x, int y, const std::string& s, uint32_t color, int scale = 2);
};

// The PNG file bytes: signature, IHDR, one zlib-compressed IDAT (filter 0 on every row), IEND.
std::string encode_png(const Image& img);

// A raster line chart of `lines` (colours "#rrggbb") with ticks and numbered axes: the loss
// plot of `braid report --png`.
Image plot_lines_png(const std::vector<ChartLine>& lines, int width = 800, int height = 400);

}  // namespace braid
