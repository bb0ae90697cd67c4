"""Dialect-neutral numpy kernels shared by the ONNX, OpenVINO and HLO executors.

Kernels take plain numpy arrays and Python ints/floats/lists/strings with
explicit per-dimension parameters; each dialect's executor maps its own
attributes onto them.  Each module's docstring states its conventions.

Modules:

* :mod:`.conv` -- N-d (grouped, transposed, XLA general) convolution, auto_pad.
* :mod:`.pool` -- max/average/Lp pooling, indices, global pooling, ReduceWindow, MaxUnpool.
* :mod:`.linalg` -- matmul, XLA dot_general, gemm, einsum, integer matmul.
* :mod:`.reduce` -- reductions over axes, argmax/argmin, cumsum.
* :mod:`.gather_scatter` -- ONNX and XLA gather/scatter, one_hot, depth/space, tile.
* :mod:`.resize` -- separable N-d resize (nearest/linear/cubic/area, all coordinate modes).
* :mod:`.rnn` -- RNN/GRU/LSTM cells and sequences with configurable gate order.
* :mod:`.sort` -- top_k, stable sort, unique, non-max suppression.
* :mod:`.norm` -- batch/instance/layer/group norm, LRN, MVN, Lp norm, softmax family.
* :mod:`.elementwise` -- rounding, integer div/mod, bit shifts, activations, erf, cast.
* :mod:`.vision` -- grid sampling, affine grids, RoiAlign, MaxRoiPool.
* :mod:`.signal` -- DFT/STFT, window functions, mel weight matrices.
* :mod:`.attention` -- scaled dot-product attention (masks, GQA, KV cache), rotary embeddings.

Precision: narrow floats (float16, bfloat16, float8...) are computed in
float32 and cast back; float32 and float64 keep their precision; integer
results are exact (int64 accumulation, two's-complement wrap on the way back).
"""
