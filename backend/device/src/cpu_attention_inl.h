// The body of the CPU paged-attention kernel, included by cpu_attention.cc once per instruction
// set (no include guard on purpose). The includer defines TARGET and a 16-float vector type V16
// with these TARGET inline functions:
//   zero(), set1(f), load(p), store(p, v), add(a, b), sub(a, b), mul(a, b),
//   fmadd(a, b, c) = a * b + c rounded once, max(a, b), hmax(v), hsum(v) (a fixed tree),
//   keep_first(v, n, fill) (lanes >= n replaced by fill), exp16(v), div(a, b).
//
// One call computes one task (AttentionRow is defined by the includer, once for every ISA):
// `n_rows` query rows (tokens x the query heads of one KV head, all of one sequence) against that
// sequence's cached keys. Keys are visited in tiles of 16 positions aligned to position 0; each
// tile's K rows are transposed once into scratch, and its K and V vectors are read once for
// every two rows of the task. Per row the work is an online softmax over the tiles [0,16), [16,32),
// ... up to the row's own position, with the same operations in the same order whatever the other
// rows are: the row's result depends on its query, its position and the cache only (batch
// invariance across batch composition and prefill chunking).

// The scores of a tile's 16 keys (kt: [d_head][16]) for query q: four FMA chains over the head
// dims (d % 4), summed as (c0 + c1) + (c2 + c3); the order depends on head_dim only.
TARGET inline V16 tile_scores(const float* q, const float* kt, int32_t d_head) {
  V16 c[4] = {zero(), zero(), zero(), zero()};
  int32_t d = 0;
  for (; d + 4 <= d_head; d += 4)
    for (int i = 0; i < 4; ++i) c[i] = fmadd(set1(q[d + i]), load(kt + (d + i) * 16), c[i]);
  for (; d < d_head; ++d) c[d % 4] = fmadd(set1(q[d]), load(kt + d * 16), c[d % 4]);
  return add(add(c[0], c[1]), add(c[2], c[3]));
}

// tile_scores for two queries at once: each K vector is loaded once for both, and the eight
// chains overlap; each query's operations are tile_scores's.
TARGET inline void tile_scores2(const float* q0, const float* q1, const float* kt, int32_t d_head,
                                V16& s0, V16& s1) {
  V16 c[4] = {zero(), zero(), zero(), zero()};
  V16 e[4] = {zero(), zero(), zero(), zero()};
  int32_t d = 0;
  for (; d + 4 <= d_head; d += 4)
    for (int i = 0; i < 4; ++i) {
      const V16 k = load(kt + (d + i) * 16);
      c[i] = fmadd(set1(q0[d + i]), k, c[i]);
      e[i] = fmadd(set1(q1[d + i]), k, e[i]);
    }
  for (; d < d_head; ++d) {
    const V16 k = load(kt + d * 16);
    c[d % 4] = fmadd(set1(q0[d]), k, c[d % 4]);
    e[d % 4] = fmadd(set1(q1[d]), k, e[d % 4]);
  }
  s0 = add(add(c[0], c[1]), add(c[2], c[3]));
  s1 = add(add(e[0], e[1]), add(e[2], e[3]));
}

// One online-softmax step of a row over a tile: sc are the tile's raw scores (nv of them count),
// m and l the row's running max and sum. Writes the tile's weights to p (0 past nv) and returns
// the factor the row's accumulator is rescaled by.
TARGET inline float softmax_step(V16 sc, V16 scale, int nv, float& m, float& l, float* p) {
  sc = keep_first(mul(sc, scale), nv, -INFINITY);
  const float m_new = std::max(m, hmax(sc));
  // exp16(0) is exactly 1, so an unchanged max skips the rescale's exp (same bits).
  float alpha = 1.0f;
  if (m_new != m) {
    alignas(64) float s[16];
    store(s, exp16(set1(m - m_new)));
    alpha = s[0];
  }
  const V16 pv = keep_first(exp16(sub(sc, set1(m_new))), nv, 0.0f);
  store(p, pv);
  l = l * alpha + hsum(pv);
  m = m_new;
  return alpha;
}

// ar[d] = ar[d] * alpha + p[0] * v[0][d] + p[1] * v[1][d] + ... (jj < nv, in that order), for
// the head dims d >= d_from.
TARGET inline void accumulate_v_tail(float* ar, float alpha, const float* p, int nv,
                                     const float* const* vrow, int32_t d_from, int32_t d_head) {
  for (int32_t d = d_from; d < d_head; ++d) {
    float x = ar[d] * alpha;
    for (int jj = 0; jj < nv; ++jj) x = std::fma(p[jj], vrow[jj][d], x);
    ar[d] = x;
  }
}

// The same for every head dim, one row: 16 dims at a time, then the tail.
TARGET inline void accumulate_v(float* ar, float alpha, const float* p, int nv,
                                const float* const* vrow, int32_t d_vec, int32_t d_head) {
  const V16 av = set1(alpha);
  for (int32_t d = 0; d < d_vec; d += 16) {
    V16 x = mul(load(ar + d), av);
    for (int jj = 0; jj < nv; ++jj) x = fmadd(set1(p[jj]), load(vrow[jj] + d), x);
    store(ar + d, x);
  }
  accumulate_v_tail(ar, alpha, p, nv, vrow, d_vec, d_head);
}

// accumulate_v for two rows at once, each V vector loaded once for both; each row's operations
// are accumulate_v's (the keys both rows see first, then the rest of the longer row's, in order).
TARGET inline void accumulate_v2(float* a0, float alpha0, const float* p0, int nv0, float* a1,
                                 float alpha1, const float* p1, int nv1, const float* const* vrow,
                                 int32_t d_vec, int32_t d_head) {
  const V16 av0 = set1(alpha0), av1 = set1(alpha1);
  const int both = std::min(nv0, nv1);
  for (int32_t d = 0; d < d_vec; d += 16) {
    V16 x0 = mul(load(a0 + d), av0);
    V16 x1 = mul(load(a1 + d), av1);
    int jj = 0;
    for (; jj < both; ++jj) {
      const V16 v = load(vrow[jj] + d);
      x0 = fmadd(set1(p0[jj]), v, x0);
      x1 = fmadd(set1(p1[jj]), v, x1);
    }
    for (int j = jj; j < nv0; ++j) x0 = fmadd(set1(p0[j]), load(vrow[j] + d), x0);
    for (int j = jj; j < nv1; ++j) x1 = fmadd(set1(p1[j]), load(vrow[j] + d), x1);
    store(a0 + d, x0);
    store(a1 + d, x1);
  }
  accumulate_v_tail(a0, alpha0, p0, nv0, vrow, d_vec, d_head);
  accumulate_v_tail(a1, alpha1, p1, nv1, vrow, d_vec, d_head);
}

TARGET void attend_rows(const AttentionArgs& a, const int32_t* table, int32_t kvh_begin,
                        int32_t kvh_end, const AttentionRow* rows, int n_rows, float* scratch) {
  constexpr int kTile = 16;
  const int32_t d_head = a.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * d_head;
  const int rows_per_head = n_rows / (kvh_end - kvh_begin);
  const int32_t d_vec = d_head / kTile * kTile;  // head dims done 16 at a time in the V update
  float* kt = scratch;                           // [d_head][16]: the tile's K, transposed
  float* acc = kt + static_cast<int64_t>(d_head) * kTile;  // [n_rows][d_head]
  float* m = acc + static_cast<int64_t>(n_rows) * d_head;  // running max per row
  float* l = m + n_rows;                                   // running sum per row
  int32_t max_pos = 0;
  for (int r = 0; r < n_rows; ++r) {
    max_pos = std::max(max_pos, rows[r].pos);
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  std::fill(acc, acc + static_cast<int64_t>(n_rows) * d_head, 0.0f);
  const V16 scale = set1(a.scale);
  alignas(64) float p[kTile];
  alignas(64) float p2[kTile];
  const float* vrow[kTile];
  const float* krow[kTile];
  const float* vbase[kTile];
  for (int32_t j0 = 0; j0 <= max_pos; j0 += kTile) {
    const int nk = std::min(kTile, max_pos - j0 + 1);  // keys of this tile some row sees
    for (int jj = 0; jj < nk; ++jj) {
      const int32_t j = j0 + jj;
      const int64_t slot =
          static_cast<int64_t>(table[j / a.block_size]) * a.block_size + j % a.block_size;
      krow[jj] = a.k_cache + slot * kv_dim;
      vbase[jj] = a.v_cache + slot * kv_dim;
      // The next tile's K and V rows (this task's heads) are fetched while this one is computed.
      const int32_t jn = j + kTile;
      if (jn <= max_pos) {
        const int64_t next =
            static_cast<int64_t>(table[jn / a.block_size]) * a.block_size + jn % a.block_size;
        for (int64_t d = int64_t{kvh_begin} * d_head; d < int64_t{kvh_end} * d_head; d += 16) {
          __builtin_prefetch(a.k_cache + next * kv_dim + d);
          __builtin_prefetch(a.v_cache + next * kv_dim + d);
        }
      }
    }
    for (int32_t kvh = kvh_begin; kvh < kvh_end; ++kvh) {
      const int64_t head_off = static_cast<int64_t>(kvh) * d_head;
      transpose_k(krow, nk, head_off, d_head, kt);
      for (int jj = 0; jj < nk; ++jj) vrow[jj] = vbase[jj] + head_off;
      // The rows that see this tile, two at a time (one K and V load serves both), then the
      // last alone.
      const int r_end = (kvh - kvh_begin + 1) * rows_per_head;
      int r = (kvh - kvh_begin) * rows_per_head;
      while (true) {
        while (r < r_end && rows[r].pos < j0) ++r;
        int r2 = r + 1;
        while (r2 < r_end && rows[r2].pos < j0) ++r2;
        if (r >= r_end) break;
        const int nv = std::min(kTile, rows[r].pos - j0 + 1);
        float* ar = acc + static_cast<int64_t>(r) * d_head;
        if (r2 >= r_end) {
          const float alpha =
              softmax_step(tile_scores(rows[r].q, kt, d_head), scale, nv, m[r], l[r], p);
          accumulate_v(ar, alpha, p, nv, vrow, d_vec, d_head);
          break;
        }
        const int nv2 = std::min(kTile, rows[r2].pos - j0 + 1);
        V16 sc, sc2;
        tile_scores2(rows[r].q, rows[r2].q, kt, d_head, sc, sc2);
        const float alpha = softmax_step(sc, scale, nv, m[r], l[r], p);
        const float alpha2 = softmax_step(sc2, scale, nv2, m[r2], l[r2], p2);
        accumulate_v2(ar, alpha, p, nv, acc + static_cast<int64_t>(r2) * d_head, alpha2, p2, nv2,
                      vrow, d_vec, d_head);
        r = r2 + 1;
      }
    }
  }
  for (int r = 0; r < n_rows; ++r) {
    const float inv = 1.0f / l[r];
    const float* ar = acc + static_cast<int64_t>(r) * d_head;
    for (int32_t d = 0; d < d_head; ++d) rows[r].out[d] = ar[d] * inv;
  }
}

// y[i] = gate[i] / (1 + exp(-gate[i])) * up[i] (SwiGLU) with the attention's exp16, so that every
// instruction set computes the same function; the last n % 16 elements through a padded vector.
TARGET void swiglu_range(const float* gate, const float* up, int64_t n, float* y) {
  const V16 one = set1(1.0f);
  auto swiglu16 = [&](V16 g, V16 u)
                      TARGET { return mul(div(g, add(one, exp16(sub(zero(), g)))), u); };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) store(y + i, swiglu16(load(gate + i), load(up + i)));
  if (i < n) {
    alignas(64) float g[16] = {}, u[16] = {}, out[16];
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    store(out, swiglu16(load(g), load(u)));
    std::copy(out, out + (n - i), y + i);
  }
}
