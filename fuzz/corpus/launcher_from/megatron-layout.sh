# trainplan: llama3-70b (70.55 B parameters) on 1 T tokens: TP 8 × PP 64 × DP 4 = 2048 GPUs, ZeRO 3; 59605 steps of 2048 sequences × 8192 tokens (micro-batch 1, 512 micro-batches a replica)
# note: the plan names no batch: 2048 sequences of 8192 tokens a step (16.78 M tokens), the multiple of micro-batch × DP = 4 nearest the 16777216-token target
# Megatron-LM pretrain_gpt.py arguments (names from megatron/training/arguments.py at commit 000c4ac24f61).
# Add your data (--data-path), tokenizer (--tokenizer-type, --tokenizer-model; vocabulary 128256), optimizer and schedule.
# Megatron-FSDP (ZeRO 3): unset CUDA_DEVICE_MAX_CONNECTIONS
# Launch on 2048 GPUs (2048 ranks of TP × PP × DP), e.g. torchrun ... pretrain_gpt.py "${MEGATRON_ARGS[@]}"
MEGATRON_ARGS=(
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 64
    --pipeline-model-parallel-layout "Et|(t|)*47,(t*2|)*15,t*2L"
    --sequence-parallel
    --use-megatron-fsdp
    --data-parallel-sharding-strategy optim_grads_params
    --use-distributed-optimizer
    --no-gradient-accumulation-fusion
    --ckpt-format fsdp_dtensor
    --num-layers 80
    --hidden-size 8192
    --ffn-hidden-size 28672
    --num-attention-heads 64
    --group-query-attention
    --num-query-groups 8
    --swiglu
    --normalization RMSNorm
    --norm-epsilon 1e-05
    --position-embedding-type rope
    --rotary-base 500000
    --use-rope-scaling
    --make-vocab-size-divisible-by 32
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --seq-length 8192
    --max-position-embeddings 8192
    --micro-batch-size 1
    --global-batch-size 2048
    --train-iters 59605
    --recompute-granularity full
    --recompute-method uniform
    --recompute-num-layers 1
    --bf16
    --transformer-impl transformer_engine
    --attention-backend fused
    --cross-entropy-loss-fusion
    --overlap-grad-reduce
    --overlap-param-gather
    --tp-comm-overlap
)
