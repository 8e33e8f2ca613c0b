# trainplan: llama3-8b (8.03 B parameters) on 1 B tokens: TP 2 × PP 2 × DP 16 = 64 GPUs, ZeRO 2; 60 steps of 2048 sequences × 8192 tokens (micro-batch 1, 128 micro-batches a replica)
# ZeRO 2: FSDP2 without resharding after forward (ZeRO 2), no more memory than ZeRO 2.
# torchtitan 0.3.0: the named config llama3_8b of torchtitan/models/llama3/config_registry.py with the plan's settings as overrides (its frozen command-line options). Run from a torchtitan checkout, or with the wheel installed.
torchrun --nproc_per_node 8 --nnodes 8 \
  -m torchtitan.train --module llama3 --config llama3_8b \
  --training.global_batch_size 2048 \
  --training.local_batch_size 128 \
  --training.mixed_precision_param bfloat16 \
  --training.mixed_precision_reduce float32 \
  --training.seq_len 8192 \
  --training.steps 60 \
  --parallelism.context_parallel_degree 1 \
  --parallelism.data_parallel_replicate_degree 1 \
  --parallelism.data_parallel_shard_degree 16 \
  --parallelism.fsdp_reshard_after_forward never \
  --parallelism.pipeline_parallel_degree 2 \
  --parallelism.pipeline_parallel_microbatch_size 1 \
  --parallelism.pipeline_parallel_schedule 1F1B \
  --parallelism.tensor_parallel_degree 2 \
  --training.disable_cuda_graphs \
  --compile.no-enable \
  activation-checkpoint:full
