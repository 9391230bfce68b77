#include "core/runtime/output_layout.h"

#include <algorithm>

#include "ringlet/common/even_split.h"

namespace ringlet::core::runtime {

namespace {

std::vector<int64_t> with_first(int64_t first, const std::vector<int64_t>& shape) {
  std::vector<int64_t> s = shape;
  if (s.empty())
    s.push_back(first);
  else
    s[0] = first;
  return s;
}

}  // namespace

OutputLayout output_layout(Communicator& comm, const Response& resp, const Metadata& mine) {
  const Metadata& m = resp.meta[0];
  const int64_t row = m.row_elements();
  const int n = comm.size();
  const int me = comm.rank();
  OutputLayout l;
  l.send.resize(n);
  switch (resp.kind) {
    case CollectiveKind::kAllgather: {
      const auto& per = resp.per_rank[0];  // per[r]: rank r's shape
      int64_t rows = 0;
      for (int r = 0; r < n; ++r) {
        l.send[r] = static_cast<size_t>(per[r][0] * row);
        rows += per[r][0];
      }
      l.elements = static_cast<size_t>(rows * row);
      l.shape = with_first(rows, mine.shape);
      break;
    }
    case CollectiveKind::kReducescatter: {
      const size_t d0 = static_cast<size_t>(m.shape[0]);
      for (int r = 0; r < n; ++r) {
        l.send[r] = common::even_share(d0, n, r) * static_cast<size_t>(row);
      }
      l.elements = l.send[me];
      l.shape = with_first(static_cast<int64_t>(common::even_share(d0, n, me)), mine.shape);
      break;
    }
    case CollectiveKind::kAlltoall: {
      const auto& splits = resp.per_rank[0];  // splits[i][j]: rows rank i sends to rank j
      l.recv.resize(n);
      int64_t rows = 0;
      for (int j = 0; j < n; ++j) {
        l.send[j] = static_cast<size_t>(splits[me][j] * row);
        l.recv[j] = static_cast<size_t>(splits[j][me] * row);
        rows += splits[j][me];
        l.received_splits.push_back(splits[j][me]);
      }
      for (const auto& from : splits) {
        for (int64_t rows_to : from) {
          l.largest = std::max(l.largest, static_cast<size_t>(rows_to * row));
        }
      }
      l.elements = static_cast<size_t>(rows * row);
      l.shape = with_first(rows, mine.shape);
      break;
    }
    case CollectiveKind::kAllreduce:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv:
      l.elements = static_cast<size_t>(mine.elements());
      l.shape = mine.shape;
      break;
  }
  return l;
}

}  // namespace ringlet::core::runtime
