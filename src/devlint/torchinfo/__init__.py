"""What devlint knows about torch, as tables and patterns, without importing it: qualified names
of factories, moves and loaders (`names`), CUDA-availability tests (`guards`), the `torch.cuda`
calls that raise without CUDA (`cuda_api`), tensor-only members (`tensor_members`), the buffers
and tensors `torch.nn` classes make (`torch_buffers`, `torch_nn_tensors`; generated from the
installed torch by scripts under `bench/` and pinned by tests)."""
