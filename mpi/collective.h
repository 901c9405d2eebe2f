// The communication layer of the distributed index: a duplicated
// communicator that returns MPI errors instead of aborting, the collective
// agreement on a status that keeps every rank on the same path, and typed
// all-to-all exchanges of rows.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/non_copyable.h"
#include "knn_gpgpu.h"

namespace knn_mpi {

// A failure every rank has agreed on (or a local MPI failure): the status and
// the message knn_mpi_last_error() returns.
class Failure : public std::runtime_error {
 public:
  Failure(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// Throws Failure(INTERNAL) naming the MPI call when rc is not MPI_SUCCESS.
void check_mpi(int rc, const char* call);

// Stops a collective call at a phase boundary: the caller's time limit and
// cancel flag, read on each rank and agreed on with the phase's status.
struct Deadline {
  double start = 0.0;
  double limit_seconds = 0.0;  // 0: none
  const volatile int* cancel_flag = nullptr;
};

// The duplicated communicator of one index (or of one build until the index
// owns it): its rank and size and the agreement between phases.
class Collective : knn::NonCopyable {
 public:
  // Duplicates `comm` with MPI_ERRORS_RETURN. Local failures (MPI not
  // initialised) throw Failure before any communication.
  explicit Collective(MPI_Comm comm);
  ~Collective();

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // Runs `local_work` (which may throw), then agrees with every rank on the
  // outcome of the phase `phase`: when any rank failed, was cancelled or ran
  // past its time limit, every rank throws the same Failure, naming the lowest
  // failing rank and its message. Every rank must reach the same agree calls.
  template <class Work>
  void phase(const char* phase, const Deadline& deadline, Work&& local_work) {
    int status = 0;
    std::string message;
    try {
      local_work();
    } catch (const Failure& f) {
      status = f.status();
      message = f.what();
    } catch (const std::bad_alloc&) {
      status = KNN_ERR_HOST_OUT_OF_MEMORY;
      message = "host memory allocation failed";
    } catch (const std::exception& e) {
      status = KNN_ERR_INTERNAL;
      message = e.what();
    }
    agree(phase, deadline, status, message);
  }

  // Every rank's value of x, reduced (MPI_MIN / MPI_MAX / MPI_SUM) over int64.
  int64_t all_reduce(int64_t x, MPI_Op op) const;
  // Rank r receives the sum of x over ranks 0..r-1.
  int64_t exclusive_prefix_sum(int64_t x) const;
  // Every rank's `count` values, rank after rank.
  std::vector<int64_t> all_gather(const std::vector<int64_t>& mine) const;
  std::vector<float> all_gather(const std::vector<float>& mine) const;

 private:
  void agree(const char* phase, const Deadline& deadline, int status, const std::string& message);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

// One all-to-all exchange of rows: send_rows[p] rows go to rank p (rows
// grouped by destination in send order), recv_rows[p] rows come from rank p,
// grouped by source in rank order.
struct Exchange {
  std::vector<int> send_rows, recv_rows;
  std::vector<int> send_first, recv_first;  // displacements in rows
  int64_t total_send = 0, total_recv = 0;

  // The reverse exchange (answers going back where their queries came from).
  Exchange reversed() const;
};

// Learns how many rows each rank receives (one MPI_Alltoall), then agrees that
// every rank's counts fit MPI's int counts (UNSUPPORTED otherwise).
Exchange plan_exchange(Collective& c, const std::vector<int64_t>& rows_to_rank,
                       const Deadline& deadline);

// Sends rows of `width` values of type T as planned: the receive buffer is
// allocated in an agreed phase (so a failed allocation stops every rank), then
// one MPI_Alltoallv. Adds the bytes this rank sent to others to *bytes_sent.
template <class T>
std::vector<T> exchange_rows(Collective& c, const Exchange& e, const T* send, int64_t width,
                             const Deadline& deadline, int64_t* bytes_sent);

}  // namespace knn_mpi
