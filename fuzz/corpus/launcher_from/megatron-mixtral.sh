# trainplan: mixtral-8x7b-v0.1 (46.7 B parameters) on 1 T tokens: TP 2 × PP 4 × DP 32 = 256 GPUs, ZeRO 1; 59605 steps of 2048 sequences × 8192 tokens (micro-batch 1, 64 micro-batches a replica)
# Megatron-LM pretrain_gpt.py arguments (names from megatron/training/arguments.py at commit 000c4ac24f61).
# Add your data (--data-path), tokenizer (--tokenizer-type, --tokenizer-model; vocabulary 32000), optimizer and schedule.
# TP > 1 before Blackwell: export CUDA_DEVICE_MAX_CONNECTIONS=1
# Launch on 256 GPUs (256 ranks of TP × PP × DP), e.g. torchrun ... pretrain_gpt.py "${MEGATRON_ARGS[@]}"
MEGATRON_ARGS=(
    --tensor-model-parallel-size 2
    --pipeline-model-parallel-size 4
    --num-virtual-stages-per-pipeline-rank 2
    --sequence-parallel
    --use-distributed-optimizer
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --swiglu
    --normalization RMSNorm
    --norm-epsilon 1e-05
    --position-embedding-type rope
    --rotary-base 1000000
    --make-vocab-size-divisible-by 128
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --num-experts 8
    --moe-router-topk 2
    --moe-ffn-hidden-size 14336
    --expert-model-parallel-size 8
    --moe-grouped-gemm
    --moe-token-dispatcher-type flex
    --moe-enable-deepep
    --moe-router-load-balancing-type aux_loss
    --overlap-moe-expert-parallel-comm
    --seq-length 8192
    --max-position-embeddings 8192
    --micro-batch-size 1
    --global-batch-size 2048
    --train-iters 59605
    --recompute-granularity selective
    --recompute-modules layernorm moe_act
    --bf16
    --transformer-impl transformer_engine
    --attention-backend fused
    --cross-entropy-loss-fusion
    --overlap-grad-reduce
    --overlap-param-gather
    --tp-comm-overlap
)
