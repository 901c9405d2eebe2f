// pcl_driver.cpp - PCL's NormalEstimationOMP and StatisticalOutlierRemoval
// on the cloud of the statistics side by side (issue 49, item 4), built by
// scripts/stats-peers.sh against Debian's libpcl (nothing of PCL is
// committed here).
//
//   pcl_driver normals  POINTS.npy K VX,VY,VZ OUT.npy [REPEATS]
//   pcl_driver outliers POINTS.npy K STD OUT.npy [REPEATS]
//
// POINTS.npy: float32 (n, 3). normals: setKSearch(K) (the point itself
// among its K, as ours), every core (setNumberOfThreads(0)), oriented
// towards the viewpoint as PCL does (flipNormalTowardsViewpoint); OUT gets
// float32 (n, 4): nx ny nz curvature. outliers: setMeanK(K) (K others),
// setStddevMulThresh(STD); OUT gets the kept ids, int64 (m,). Timing: the
// KdTree build and the call, as a user pays them (the cloud's copy into a
// pcl::PointCloud is not counted); the median of REPEATS (default 1) runs.
// Prints "RESULT pcl TASK n k ms 0 n" (stats_peers.py's layout: no build
// apart, every point answered).
#include <pcl/features/normal_3d_omp.h>
#include <pcl/filters/statistical_outlier_removal.h>
#include <pcl/point_cloud.h>
#include <pcl/point_types.h>
#include <pcl/search/kdtree.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::vector<float> read_npy_f32(const std::string& path, int64_t* n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  char magic[8];
  in.read(magic, 8);
  uint16_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 2);
  std::string header(header_len, ' ');
  in.read(&header[0], header_len);
  if (header.find("'<f4'") == std::string::npos || header.find("False") == std::string::npos)
    throw std::runtime_error(path + ": expected little-endian float32 in C order");
  const size_t open = header.find('(');
  *n = std::strtoll(header.c_str() + open + 1, nullptr, 10);
  std::vector<float> xyz(static_cast<size_t>(*n) * 3);
  in.read(reinterpret_cast<char*>(xyz.data()), static_cast<std::streamsize>(xyz.size() * 4));
  if (!in) throw std::runtime_error(path + ": truncated");
  return xyz;
}

template <class T>
void write_npy(const std::string& path, const char* descr, const T* data, int64_t rows,
               int64_t cols) {
  std::ostringstream h;
  h << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (" << rows
    << (cols < 0 ? ",)" : ", " + std::to_string(cols) + ")") << ", }";
  std::string header = h.str();
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(data),
            static_cast<std::streamsize>(sizeof(T) * rows * (cols < 0 ? 1 : cols)));
  if (!out) throw std::runtime_error(path + ": write error");
}

template <class F>
double median_ms(int repeats, F&& run) {
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 6) {
    std::fprintf(stderr, "usage: pcl_driver normals|outliers POINTS.npy K VIEWPOINT|STD OUT [R]\n");
    return 2;
  }
  const std::string task = argv[1];
  const int k = std::atoi(argv[3]);
  const int repeats = argc > 6 ? std::max(1, std::atoi(argv[6])) : 1;
  int64_t n = 0;
  const std::vector<float> xyz = read_npy_f32(argv[2], &n);
  pcl::PointCloud<pcl::PointXYZ>::Ptr cloud(new pcl::PointCloud<pcl::PointXYZ>);
  cloud->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    (*cloud)[i].x = xyz[3 * i];
    (*cloud)[i].y = xyz[3 * i + 1];
    (*cloud)[i].z = xyz[3 * i + 2];
  }
  double ms = 0;
  if (task == "normals") {
    float v[3];
    if (std::sscanf(argv[4], "%f,%f,%f", &v[0], &v[1], &v[2]) != 3)
      throw std::runtime_error("viewpoint: x,y,z");
    pcl::PointCloud<pcl::Normal> normals;
    ms = median_ms(repeats, [&] {
      pcl::NormalEstimationOMP<pcl::PointXYZ, pcl::Normal> ne(0);
      ne.setInputCloud(cloud);
      ne.setSearchMethod(
          pcl::search::KdTree<pcl::PointXYZ>::Ptr(new pcl::search::KdTree<pcl::PointXYZ>));
      ne.setKSearch(k);
      ne.setViewPoint(v[0], v[1], v[2]);
      ne.compute(normals);
    });
    std::vector<float> out(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      out[4 * i] = normals[i].normal_x;
      out[4 * i + 1] = normals[i].normal_y;
      out[4 * i + 2] = normals[i].normal_z;
      out[4 * i + 3] = normals[i].curvature;
    }
    write_npy(argv[5], "<f4", out.data(), n, 4);
  } else if (task == "outliers") {
    const double std_mul = std::atof(argv[4]);
    pcl::Indices kept;
    ms = median_ms(repeats, [&] {
      pcl::StatisticalOutlierRemoval<pcl::PointXYZ> sor;
      sor.setInputCloud(cloud);
      sor.setMeanK(k);
      sor.setStddevMulThresh(std_mul);
      sor.filter(kept);
    });
    std::vector<int64_t> ids(kept.begin(), kept.end());
    write_npy(argv[5], "<i8", ids.data(), static_cast<int64_t>(ids.size()), -1);
  } else {
    throw std::runtime_error("task: normals or outliers");
  }
  std::printf("RESULT pcl %s %lld %d %.3f 0 %lld\n", task.c_str(), static_cast<long long>(n), k, ms,
              static_cast<long long>(n));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "pcl_driver: %s\n", e.what());
  return 1;
}
