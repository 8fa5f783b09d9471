#!/bin/bash
# The cuDNN API log (cuDNN 9: CUDNN_LOGLEVEL_DBG) of four recurrent calls as
# PyTorch makes them: the RNN descriptor PyTorch sets (algo, cell mode, data
# type, math precision, math type, sizes, dropout, aux flags) and the data
# descriptors passed to cudnnGetRNNTempSpaceSizes. One forward and backward
# each. Writes $OUT/cudnn_rnn_api.log (the lines of the RNN calls only).
set -u
: "${OUT:?set OUT}"
log="$OUT/cudnn_rnn_api_full.log"
CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG="$log" CUDNN_LOGINFO_DBG=1 python3 - <<'PY'
import torch
import torch.nn as nn
for mode, kw, shape, dt in (
        (nn.LSTM, dict(input_size=512, hidden_size=1024, num_layers=2, dropout=0.2), (128, 8, 512),
         torch.float32),
        (nn.GRU, dict(input_size=80, hidden_size=512, num_layers=3, bidirectional=True,
                      dropout=0.1), (200, 8, 80), torch.float32),
        (nn.LSTM, dict(input_size=256, hidden_size=384, bidirectional=True), (96, 16, 256),
         torch.bfloat16),
        (nn.LSTM, dict(input_size=128, hidden_size=160, num_layers=2), (64, 8, 128),
         torch.float32)):
    m = mode(**kw).cuda().to(dt)
    x = torch.randn(*shape, device="cuda", dtype=dt)
    y, _ = m(x)
    y.float().sum().backward()
    torch.cuda.synchronize()
PY
# Keep the RNN calls and the descriptor contents, at most 20 MB.
grep -v -i -E "^\s*$" "$log" | head -c 20000000 > "$OUT/cudnn_rnn_api.log"
rm -f "$log"
