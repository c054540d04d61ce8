// The body of the CPU paged-attention kernel, included by cpu_attention.cc once per instruction
// set (no include guard on purpose). The includer defines TARGET and a 16-float vector type V16
// with these TARGET inline functions:
//   zero(), set1(f), load(p), store(p, v), add(a, b), sub(a, b), mul(a, b),
//   fmadd(a, b, c) = a * b + c rounded once, max(a, b), hmax(v), hsum(v) (a fixed tree),
//   keep_first(v, n, fill) (lanes >= n replaced by fill), exp16(v).
//
// One call computes one task (AttentionRow is defined by the includer, once for every ISA):
// `n_rows` query rows (tokens x the query heads of one KV head, all of one sequence) against that
// sequence's cached keys. Keys are visited in tiles of 16 positions aligned to position 0; each
// tile's K rows are transposed once into scratch and its V rows read once for every row of the
// task. Per row the work is an online softmax over the tiles [0,16), [16,32), ... up to the row's
// own position, with the same operations in the same order whatever the other rows are: the row's
// result depends on its query, its position and the cache only (batch invariance across batch
// composition and prefill chunking).

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
  alignas(64) float s[kTile];
  alignas(64) float p[kTile];
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
      const int r_begin = (kvh - kvh_begin) * rows_per_head;
      for (int r = r_begin; r < r_begin + rows_per_head; ++r) {
        if (rows[r].pos < j0) continue;
        const int nv = std::min(kTile, rows[r].pos - j0 + 1);
        // Scores of the tile's 16 keys: four FMA chains over the head dims (d % 4), summed as
        // (c0 + c1) + (c2 + c3); the order depends on head_dim only.
        const float* q = rows[r].q;
        V16 c[4] = {zero(), zero(), zero(), zero()};
        int32_t d = 0;
        for (; d + 4 <= d_head; d += 4)
          for (int i = 0; i < 4; ++i)
            c[i] = fmadd(set1(q[d + i]), load(kt + (d + i) * kTile), c[i]);
        for (; d < d_head; ++d) c[d % 4] = fmadd(set1(q[d]), load(kt + d * kTile), c[d % 4]);
        V16 sc = add(add(c[0], c[1]), add(c[2], c[3]));
        sc = keep_first(mul(sc, scale), nv, -INFINITY);
        const float m_new = std::max(m[r], hmax(sc));
        // exp16(0) is exactly 1, so an unchanged max skips the rescale's exp (same bits).
        float alpha = 1.0f;
        if (m_new != m[r]) {
          store(s, exp16(set1(m[r] - m_new)));
          alpha = s[0];
        }
        const V16 pv = keep_first(exp16(sub(sc, set1(m_new))), nv, 0.0f);
        store(p, pv);
        l[r] = l[r] * alpha + hsum(pv);
        m[r] = m_new;
        float* ar = acc + static_cast<int64_t>(r) * d_head;
        const V16 av = set1(alpha);
        for (int32_t d = 0; d < d_vec; d += kTile) {
          V16 x = mul(load(ar + d), av);
          for (int jj = 0; jj < nv; ++jj) x = fmadd(set1(p[jj]), load(vrow[jj] + d), x);
          store(ar + d, x);
        }
        for (int32_t d = d_vec; d < d_head; ++d) {
          float x = ar[d] * alpha;
          for (int jj = 0; jj < nv; ++jj) x = std::fma(p[jj], vrow[jj][d], x);
          ar[d] = x;
        }
      }
    }
  }
  for (int r = 0; r < n_rows; ++r) {
    const float inv = 1.0f / l[r];
    const float* ar = acc + static_cast<int64_t>(r) * d_head;
    for (int32_t d = 0; d < d_head; ++d) rows[r].out[d] = ar[d] * inv;
  }
}
