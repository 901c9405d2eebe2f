#include "../openmp/omp_engine.h"
