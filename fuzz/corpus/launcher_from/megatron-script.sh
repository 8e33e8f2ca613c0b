#!/bin/bash
# A launch script: variables, arrays, torchrun's counts.
export CUDA_DEVICE_MAX_CONNECTIONS=1
NNODES=${NNODES:-2}
PAR="--tensor-model-parallel-size 4 --sequence-parallel"
MODEL=(
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336
  --num-attention-heads 32 --group-query-attention --num-query-groups 8
  --swiglu --disable-bias-linear --untie-embeddings-and-output-weights
  --normalization RMSNorm --position-embedding-type rope
  --rotary-base 500000 --use-rope-scaling --vocab-size 128256
)
TRAIN=(
  --bf16 --seq-length 8192 --max-position-embeddings 8192
  --micro-batch-size 1 --global-batch-size 256 --train-iters 1000
  --recompute-granularity selective --use-distributed-optimizer
  --attention-backend fused --cross-entropy-loss-fusion --overlap-grad-reduce
  --overlap-param-gather --tp-comm-overlap
  --data-path /data/tokens --lr 3e-4
)
cd /workspace && torchrun --nproc_per_node=8 --nnodes=$NNODES pretrain_gpt.py \
  "${MODEL[@]}" "${TRAIN[@]}" $PAR $EXTRA_ARGS 2>&1 | tee log.txt
