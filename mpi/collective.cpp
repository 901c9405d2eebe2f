#include "collective.h"

#include <climits>
#include <cstring>
#include <type_traits>

#include "knn_gpgpu.h"

namespace knn_mpi {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  throw Failure(KNN_ERR_INTERNAL, std::string(call) + " failed: " + std::string(text, length));
}

Collective::Collective(MPI_Comm comm) {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (!initialised || finalised)
    throw Failure(KNN_ERR_INVALID_ARGUMENT, "MPI is not initialised (or already finalised)");
  if (comm == MPI_COMM_NULL)
    throw Failure(KNN_ERR_INVALID_ARGUMENT, "the communicator is MPI_COMM_NULL");
  // The caller's handler may abort the job; ours returns every error as a code.
  check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

Collective::~Collective() {
  // An index freed after MPI_Finalize (a host's garbage collector at exit)
  // must not call MPI any more; the communicator went with MPI.
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (comm_ != MPI_COMM_NULL && !finalised) MPI_Comm_free(&comm_);
}

void Collective::agree(const char* phase, const Deadline& deadline, int status,
                       const std::string& message) {
  std::string why = message;
  if (status == KNN_OK && deadline.cancel_flag && *deadline.cancel_flag != 0) {
    status = KNN_ERR_CANCELLED;
    why = std::string("cancelled (flag set) before the end of ") + phase;
  }
  if (status == KNN_OK && deadline.limit_seconds > 0.0 &&
      MPI_Wtime() - deadline.start > deadline.limit_seconds) {
    status = KNN_ERR_CANCELLED;
    why = "time limit of " + std::to_string(deadline.limit_seconds) + " s passed during " + phase;
  }
  int mine = status == KNN_OK ? size_ : rank_;
  int first = size_;
  check_mpi(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
  if (first == size_) return;
  struct {
    int status;
    char text[500];
  } verdict{};
  if (rank_ == first) {
    verdict.status = status;
    std::string line = "rank " + std::to_string(rank_) + ": " + why;
    std::strncpy(verdict.text, line.c_str(), sizeof verdict.text - 1);
  }
  check_mpi(MPI_Bcast(&verdict, sizeof verdict, MPI_BYTE, first, comm_), "MPI_Bcast");
  throw Failure(verdict.status, verdict.text);
}

int64_t Collective::all_reduce(int64_t x, MPI_Op op) const {
  int64_t out = 0;
  check_mpi(MPI_Allreduce(&x, &out, 1, MPI_INT64_T, op, comm_), "MPI_Allreduce");
  return out;
}

int64_t Collective::exclusive_prefix_sum(int64_t x) const {
  int64_t out = 0;
  check_mpi(MPI_Exscan(&x, &out, 1, MPI_INT64_T, MPI_SUM, comm_), "MPI_Exscan");
  return rank_ == 0 ? 0 : out;  // MPI leaves rank 0's result undefined
}

namespace {

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, int64_t>)
    return MPI_INT64_T;
  else {
    static_assert(std::is_same_v<T, int32_t>);
    return MPI_INT32_T;
  }
}

int checked_int(int64_t x, const char* what) {
  if (x < 0 || x > INT_MAX)
    throw Failure(KNN_ERR_UNSUPPORTED, std::string(what) + " of " + std::to_string(x) +
                                           " exceeds one MPI message's count (2^31 - 1)");
  return static_cast<int>(x);
}

// Variable-size gather: every rank's vector, concatenated in rank order.
template <class T>
std::vector<T> gather_all(const Collective& c, const std::vector<T>& mine) {
  int count = checked_int(static_cast<int64_t>(mine.size()), "a gathered block");
  std::vector<int> counts(c.size()), first(c.size());
  check_mpi(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, c.comm()),
            "MPI_Allgather");
  int64_t total = 0;
  for (int p = 0; p < c.size(); ++p) {
    first[p] = checked_int(total, "a gathered total");
    total += counts[p];
  }
  checked_int(total, "a gathered total");
  std::vector<T> all(static_cast<size_t>(total));
  check_mpi(MPI_Allgatherv(mine.data(), count, mpi_type<T>(), all.data(), counts.data(),
                           first.data(), mpi_type<T>(), c.comm()),
            "MPI_Allgatherv");
  return all;
}

}  // namespace

std::vector<int64_t> Collective::all_gather(const std::vector<int64_t>& mine) const {
  return gather_all(*this, mine);
}
std::vector<float> Collective::all_gather(const std::vector<float>& mine) const {
  return gather_all(*this, mine);
}

Exchange plan_exchange(Collective& c, const std::vector<int64_t>& rows_to_rank,
                       const Deadline& deadline) {
  Exchange e;
  int ranks = c.size();
  e.send_rows.resize(ranks);
  e.recv_rows.resize(ranks);
  e.send_first.resize(ranks);
  e.recv_first.resize(ranks);
  // Each count for one rank is at most a caller's rows (< 2^31); the totals
  // (displacements are int too) are checked in the agreed phase below, after
  // the one collective every rank makes regardless.
  for (int p = 0; p < ranks; ++p) {
    e.send_rows[p] = static_cast<int>(rows_to_rank[p]);
    e.total_send += rows_to_rank[p];
  }
  check_mpi(MPI_Alltoall(e.send_rows.data(), 1, MPI_INT, e.recv_rows.data(), 1, MPI_INT, c.comm()),
            "MPI_Alltoall");
  c.phase("planning an exchange", deadline, [&] {
    checked_int(e.total_send, "rows sent by one rank");
    int64_t sent = 0;
    for (int p = 0; p < ranks; ++p) {
      e.send_first[p] = static_cast<int>(sent);
      sent += e.send_rows[p];
      e.recv_first[p] = checked_int(e.total_recv, "rows received by one rank");
      e.total_recv += e.recv_rows[p];
    }
    checked_int(e.total_recv, "rows received by one rank");
  });
  return e;
}

Exchange Exchange::reversed() const {
  Exchange r;
  r.send_rows = recv_rows;
  r.recv_rows = send_rows;
  r.send_first = recv_first;
  r.recv_first = send_first;
  r.total_send = total_recv;
  r.total_recv = total_send;
  return r;
}

template <class T>
std::vector<T> exchange_rows(Collective& c, const Exchange& e, const T* send, int64_t width,
                             const Deadline& deadline, int64_t* bytes_sent) {
  std::vector<T> received;
  c.phase("allocating an exchange", deadline, [&] {
    checked_int(width, "a row's width");
    received.resize(static_cast<size_t>(e.total_recv * width));
  });
  if (width == 0) return received;
  // One datatype per row keeps the counts in rows, which were checked to fit.
  MPI_Datatype row;
  check_mpi(MPI_Type_contiguous(static_cast<int>(width), mpi_type<T>(), &row),
            "MPI_Type_contiguous");
  check_mpi(MPI_Type_commit(&row), "MPI_Type_commit");
  int rc = MPI_Alltoallv(send, e.send_rows.data(), e.send_first.data(), row, received.data(),
                         e.recv_rows.data(), e.recv_first.data(), row, c.comm());
  MPI_Type_free(&row);
  check_mpi(rc, "MPI_Alltoallv");
  if (bytes_sent) {
    int64_t rows_out = e.total_send - e.send_rows[c.rank()];
    *bytes_sent += rows_out * width * static_cast<int64_t>(sizeof(T));
  }
  return received;
}

template std::vector<float> exchange_rows(Collective&, const Exchange&, const float*, int64_t,
                                          const Deadline&, int64_t*);
template std::vector<int64_t> exchange_rows(Collective&, const Exchange&, const int64_t*, int64_t,
                                            const Deadline&, int64_t*);
template std::vector<int32_t> exchange_rows(Collective&, const Exchange&, const int32_t*, int64_t,
                                            const Deadline&, int64_t*);

}  // namespace knn_mpi
