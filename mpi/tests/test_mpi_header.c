/* knn_gpgpu_mpi.h from C99 (-pedantic): the communicator through
 * KNN_MPI_COMM, a call before MPI_Init refused with a message, and a tiny
 * index whose answers are known: rank r holds the points (r, 0) and
 * (r + 0.25, 0) of the union, in that order. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "knn_gpgpu_mpi.h"

#define EXPECT(cond)                                                                              \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #cond, knn_mpi_last_error()); \
      failures++;                                                                                 \
    }                                                                                             \
  } while (0)

int main(int argc, char** argv) {
  int failures = 0, rank = 0, size = 1, all = 0;
  MPI_Comm world = MPI_COMM_WORLD;
  knn_dindex* index = NULL;
  float points[4], query[2];
  int64_t ids[2];
  float d2[2];

  EXPECT(knn_dindex_build(KNN_MPI_COMM(world), NULL, 0, 2, NULL, &index) ==
         KNN_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(knn_mpi_last_error(), "not initialised") != NULL);
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  points[0] = (float)rank;
  points[1] = 0.0f;
  points[2] = (float)rank + 0.25f;
  points[3] = 0.0f;
  EXPECT(knn_dindex_build(KNN_MPI_COMM(world), points, 2, 2, NULL, &index) == KNN_OK);
  /* Just right of the last rank's second point: it, then the point before. */
  query[0] = (float)(size - 1) + 0.375f;
  query[1] = 0.0f;
  EXPECT(knn_dindex_query(index, query, 1, 2, ids, d2) == KNN_OK);
  EXPECT(ids[0] == 2 * size - 1 && ids[1] == 2 * size - 2);
  EXPECT(d2[0] == 0.015625f && d2[1] == 0.140625f);
  EXPECT(knn_dindex_free(index) == KNN_OK);
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, world);
  if (rank == 0) printf("test_mpi_header: %d ranks, %d failures\n", size, all);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
