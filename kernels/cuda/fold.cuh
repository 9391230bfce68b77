// Private to kernels/cuda: the fold of many inputs at an element and the
// allreduce's result made from it, shared by the reductions (reduce.cu) and
// the allreduce whose kernels synchronise among themselves
// (peer_allreduce.cu), so that both round alike.
#pragma once

#include "device_types.cuh"

namespace ringlet::kernels::cuda::detail {

// The fold of k inputs at an element, in input order, in the compute type,
// each thread in registers; each input first scaled and rounded to S as pack
// scales it where `prescaled`. Shared by reduce_many and reduce_many_to_all.
template <class Op, class S>
struct Fold {
  static constexpr int L = kLanes16<S>;
  using C = typename Element<S>::Compute;
  const void* const* inputs;
  int k;
  bool prescaled;
  ops::ScaleType<C> prescale;

  __device__ const S* input(int j) const { return static_cast<const S*>(inputs[j]); }
  __device__ C in(S x) const {
    if (!prescaled) return Element<S>::widen(x);
    return Element<S>::widen(Element<S>::narrow(ops::ScaleBy<C>{prescale}(Element<S>::widen(x))));
  }
  __device__ C at(size_t i) const {
    C acc = in(input(0)[i]);
    for (int j = 1; j < k; ++j) acc = Op{}(acc, in(input(j)[i]));
    return acc;
  }
  __device__ void lanes(size_t i, C (&acc)[L]) const {
    const Lanes<S, L> first = detail::load_lanes<S, L>(input(0) + i);
#pragma unroll
    for (int l = 0; l < L; ++l) acc[l] = in(first.v[l]);
    for (int j = 1; j < k; ++j) {
      const Lanes<S, L> x = detail::load_lanes<S, L>(input(j) + i);
#pragma unroll
      for (int l = 0; l < L; ++l) acc[l] = Op{}(acc[l], in(x.v[l]));
    }
  }
  // Whether every input reaches 16 bytes `head` elements on. The pointers
  // live on the device, so this is decided in the kernel, once per thread,
  // from the same values on every thread.
  __device__ bool aligned_after(size_t head) const {
    bool all = true;
    for (int j = 0; j < k; ++j) all = all && detail::aligned_after(input(j), sizeof(S), head, 16);
    return all;
  }
};

// Every rank's part of an allreduce in one pass, step for step as the
// staged path rounds it: the fold (with the prescale) rounded to S, then the
// result's one scale (the postscale, with an average's 1/n) as scale does;
// the result is stored to every output.
template <class Op, class S>
struct ReduceToAll {
  static constexpr int L = kLanes16<S>;
  using C = typename Element<S>::Compute;
  using Scale = ops::ScaleType<C>;
  Fold<Op, S> fold;
  void* const* outputs;
  int m;
  bool scaled;
  Scale factor;

  __device__ S* output(int j) const { return static_cast<S*>(outputs[j]); }
  __device__ S out(C acc) const {
    const S x = Element<S>::narrow(acc);
    if (!scaled) return x;
    return Element<S>::narrow(ops::ScaleBy<C>{factor}(Element<S>::widen(x)));
  }
  __device__ void scalar(size_t i) const {
    const S v = out(fold.at(i));
    for (int j = 0; j < m; ++j) output(j)[i] = v;
  }
  __device__ Lanes<S, L> load(size_t i) const {
    C acc[L];
    fold.lanes(i, acc);
    Lanes<S, L> r;
#pragma unroll
    for (int l = 0; l < L; ++l) r.v[l] = out(acc[l]);
    return r;
  }
  __device__ void store(size_t i, const Lanes<S, L>& r) const {
    for (int j = 0; j < m; ++j) detail::store_lanes<S, L>(output(j) + i, r);
  }
};

// f over [0, n) on threads tid, tid + stride, ...: 16 bytes an access where
// every input and output reach 16 bytes at the same element.
template <class Op, class S>
__device__ __forceinline__ void reduce_to_all(const ReduceToAll<Op, S>& f, size_t n, size_t tid,
                                              size_t stride) {
  const size_t head = head_elements(f.output(0), sizeof(S), 16, n);
  bool vector = f.fold.aligned_after(head);
  for (int j = 1; j < f.m; ++j) vector = vector && aligned_after(f.output(j), sizeof(S), head, 16);
  elementwise<ReduceToAll<Op, S>::L>(f, n, head, vector, tid, stride);
}

}  // namespace ringlet::kernels::cuda::detail
