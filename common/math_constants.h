// Mathematical constants for tests, benchmarks and tools. M_PI and its kin
// are POSIX extensions that strict C++17 does not have (MinGW with
// -std=c++17 and MSVC without _USE_MATH_DEFINES leave them undefined), so
// the project names its own.
#pragma once

namespace knn {

constexpr double kPi = 3.14159265358979323846264338327950288;

}  // namespace knn
