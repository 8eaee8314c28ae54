"""The transformer's training step as one Triton kernel (engine 13 on CUDA, issue 25 goal 5).

Engine 4's GPU step writes every activation of every token row to memory and reads it back in
the backward (≈ 8 GB a seed-epoch at the paper's shape: docs/performance.md, "On a GPU"), so it
runs at a fifth of the fp32 matmul peak. Here one program takes one member's share of the examples,
tile by tile (``BT`` examples, positions padded to ``P``), and runs each tile's forward, loss
and backward to the end: the elementwise work (LayerNorm, softmax, ReLU, residual adds) is fused
between the tile's matmuls, what the backward needs goes to the program's own scratch slot (read
back moments later, from L2 where it fits), and each program sums its tiles' weight gradients in
its own slot of ``partial`` — in tile order, no atomics — which the caller then adds over
programs in one fixed order. The split of a member's examples into programs depends on the
number of examples alone, so a member computes the same sums in any ensemble.

The model is :class:`~rulelab.models.transformer.EnsembleTransformer` (SPEC S.2): CLS at
position 0, learned positions, bidirectional attention, pre-LayerNorm blocks (or none), a ReLU
MLP (or none), the last block's query and MLP at CLS only, logits read at CLS, cross-entropy.
Parameters arrive packed per member in :func:`layout`'s order (each tensor's own memory order).

Padding: positions ≥ T are masked as keys (probability exactly 0), so they never reach a real
row, and nothing reads their outputs, so their gradients are exactly 0 and add nothing to a
weight's gradient; examples past the batch take label −1 and a loss gradient of 0. Dimensions
(d_model, d_head, d_mlp) must be powers of two ≥ 16 (``tl.dot``'s blocks); the vocabulary and
the class count are padded with masks. ``DOT`` is ``tl.dot``'s input precision: ``"ieee"``
(fp32 products, the tests' and the default's) or ``"tf32"``.

Correctness is tested on the CPU with Triton's interpreter (``TRITON_INTERPRET=1``,
tests/engine/models/test_gpu_tile_step.py) against PyTorch's autograd of the model's forward.
"""

from __future__ import annotations

import triton
import triton.language as tl

from rulelab.models.gpu_tile_parts import (
    add_mat,
    add_rows_gram,
    add_vec,
    at_cls,
    block_params,
    dot,
    dot_nt,
    dot_nt_k,
    dot_tn,
    layer_scratch,
    ln_bwd,
    ln_fwd,
    mat,
    on_cls_rows,
    put,
    tile_tokens,
    vec,
)


@triton.jit
def step(p_ptr, g_ptr, x_ptr, y_ptr, loss_ptr, scr_ptr, B, n_prog, inv_denom, eps, scale,
         NP: tl.constexpr, V1: tl.constexpr, VP: tl.constexpr, T: tl.constexpr,
         P: tl.constexpr, D: tl.constexpr, H: tl.constexpr, DH: tl.constexpr,
         F: tl.constexpr, K: tl.constexpr, KP: tl.constexpr, L: tl.constexpr,
         LN: tl.constexpr, BT: tl.constexpr, TILES: tl.constexpr, DOT: tl.constexpr,
         O_POS: tl.constexpr, O_L0: tl.constexpr, LSTRIDE: tl.constexpr,
         O_FIN: tl.constexpr, STAGE: tl.constexpr):
    """Program (member ``e``, slice ``s``): ``TILES`` tiles of ``BT`` examples from
    example ``s·TILES·BT`` (``scale`` = 1/√d_head); the loss sum into ``loss_ptr[e, s]``,
    the gradient sums into ``g_ptr[e, s]`` (``NP`` floats, :func:`layout`'s order). ``STAGE``:
    the weight gradients over a tile's rows read their operands back from the scratch 16 rows
    at a time (:func:`add_rows_gram`), or (0) one product each from registers."""
    e = tl.program_id(0)
    s = tl.program_id(1)
    R: tl.constexpr = BT * P  # token rows of a tile: example-major, position-minor
    # the last block at CLS only (its products need 16 rows for tl.dot); smaller tiles run it at
    # every position and read CLS after it
    CLS: tl.constexpr = BT >= 16
    # a layer's scratch: x̂ and 1/σ, q/k/v/z of each head, probabilities, x̂₂, 1/σ₂, MLP pre;
    # after the layers', the rows' gradient [R, D] (the residual's, as the backward reaches
    # each weight, and the embeddings'), then a weight gradient's other operand: the MLP's
    # pre-activation gradient [R, F], or a head's dq, dk, dv [R, DH] each
    SL: tl.constexpr = R * (2 * D + 4 * H * DH + F + 2) + H * BT * P * P
    prm = p_ptr + e.to(tl.int64) * NP
    grd = g_ptr + (e.to(tl.int64) * n_prog + s) * NP
    scr = scr_ptr + (e.to(tl.int64) * n_prog + s) * (L * SL + R * (D + F + 3 * DH))
    sres = scr + L * SL  # the rows' gradient
    sg = sres + R * D  # dpre, or dq, dk, dv
    rows = tl.arange(0, R)
    pos = rows % P  # [R]
    kpos = tl.arange(0, P)  # key positions
    rD = tl.arange(0, D)
    rK = tl.arange(0, KP)
    rV = tl.arange(0, VP)
    loss_acc = tl.zeros((1,), tl.float32)
    for i in range(TILES):
        first = (s * TILES + i) * BT
        if first < B:  # the last program's share may hold fewer tiles
            tok, real = tile_tokens(x_ptr, e, B, first, rows, P, T, V1)  # [R] each
            emb = tl.load(prm + tok[:, None] * D + rD[None, :], mask=real[:, None], other=0.0)
            emb += tl.load(prm + O_POS + pos[:, None] * D + rD[None, :],
                           mask=real[:, None], other=0.0)
            resid = emb  # [R, D]
            # ---- forward ----------------------------------------------------------------
            for lyr in tl.static_range(L):
                pl = prm + O_L0 + lyr * LSTRIDE
                sl = scr + lyr * SL
                if LN:
                    h, xhat, rstd = ln_fwd(resid, vec(pl, D), vec(pl + D, D), D, eps)
                    put(sl, xhat, R, D)
                    tl.store(sl + R * D + rows, rstd)
                else:
                    h = resid
                    put(sl, h, R, D)
                sq, sprob, sm = layer_scratch(sl, R, D, H, DH, BT, P)
                wq, wk, wv, bq, bk, bv, wo, bo, pm = block_params(pl, LN, D, H, DH)
                if CLS and lyr == L - 1:  # the query at CLS only: [BT, D]
                    hc = at_cls(h, BT, P, D)
                    rc = at_cls(resid, BT, P, D)
                    attn = tl.zeros((BT, D), tl.float32)
                else:
                    attn = tl.zeros((R, D), tl.float32)
                for hd in range(H):  # a loop, not unrolled: half the code to compile
                    k = dot(h, mat(wk + hd * D * DH, D, DH), DOT) + vec(bk + hd * DH, DH)[None, :]
                    v = dot(h, mat(wv + hd * D * DH, D, DH), DOT) + vec(bv + hd * DH, DH)[None, :]
                    put(sq + (H + hd) * R * DH, k, R, DH)
                    put(sq + (2 * H + hd) * R * DH, v, R, DH)
                    k3 = tl.reshape(k, (BT, P, DH))
                    v3 = tl.reshape(v, (BT, P, DH))
                    sp = sprob + hd * BT * P * P
                    if CLS and lyr == L - 1:
                        q = dot(hc, mat(wq + hd * D * DH, D, DH), DOT)
                        q += vec(bq + hd * DH, DH)[None, :]
                        put(sq + hd * R * DH, q, BT, DH)
                        sc = tl.sum(q[:, None, :] * k3, axis=2) * scale  # [BT, P]
                        sc = tl.where(kpos[None, :] < T, sc, float("-inf"))
                        pr = tl.exp(sc - tl.max(sc, axis=1)[:, None])
                        pr = pr / tl.sum(pr, axis=1)[:, None]
                        put(sp, pr, BT, P)
                        z = tl.sum(pr[:, :, None] * v3, axis=1)  # [BT, DH]
                        put(sq + (3 * H + hd) * R * DH, z, BT, DH)
                    else:
                        q = dot(h, mat(wq + hd * D * DH, D, DH), DOT)
                        q += vec(bq + hd * DH, DH)[None, :]
                        put(sq + hd * R * DH, q, R, DH)
                        q3 = tl.reshape(q, (BT, P, DH))
                        sc = tl.dot(q3, tl.permute(k3, (0, 2, 1)), input_precision=DOT) * scale
                        sc = tl.where(kpos[None, None, :] < T, sc, float("-inf"))
                        pr = tl.exp(sc - tl.max(sc, axis=2)[:, :, None])
                        pr = pr / tl.sum(pr, axis=2)[:, :, None]  # [BT, P, P]
                        put(sp, tl.reshape(pr, (BT * P, P)), BT * P, P)
                        z = tl.reshape(tl.dot(pr, v3, input_precision=DOT), (R, DH))
                        put(sq + (3 * H + hd) * R * DH, z, R, DH)
                    attn += dot(z, mat(wo + hd * DH * D, DH, D), DOT)
                attn += vec(bo, D)[None, :]
                if CLS and lyr == L - 1:
                    resid = rc + attn  # [BT, D]
                else:
                    resid = resid + attn
                if F > 0:
                    if LN:
                        h2, xhat2, rstd2 = ln_fwd(resid, vec(pm, D), vec(pm + D, D), D, eps)
                        if CLS and lyr == L - 1:
                            put(sm, xhat2, BT, D)
                            tl.store(sm + R * D + tl.arange(0, BT), rstd2)
                        else:
                            put(sm, xhat2, R, D)
                            tl.store(sm + R * D + rows, rstd2)
                        pm += 2 * D
                    else:
                        h2 = resid
                        if CLS and lyr == L - 1:
                            put(sm, h2, BT, D)
                        else:
                            put(sm, h2, R, D)
                    pre = dot(h2, mat(pm, D, F), DOT) + vec(pm + D * F, F)[None, :]
                    if CLS and lyr == L - 1:
                        put(sm + R * D + R, pre, BT, F)
                    else:
                        put(sm + R * D + R, pre, R, F)
                    act = tl.maximum(pre, 0.0)
                    resid = resid + dot(act, mat(pm + D * F + F, F, D), DOT)
                    resid += vec(pm + 2 * D * F + F, D)[None, :]
            if not CLS:
                resid = at_cls(resid, BT, P, D)
            # The backward reads the scratch in other layouts than the forward wrote it, so by
            # other threads: every thread's writes must be done and visible first (a barrier
            # orders the block's global memory too). Triton inserts barriers for its own
            # shared memory only; it cannot see this hand-off through global memory.
            tl.debug_barrier()
            # ---- loss at CLS: resid [BT, D] ---------------------------------------------------
            fin = prm + O_FIN
            if LN:
                hf, xhatf, rstdf = ln_fwd(resid, vec(fin, D), vec(fin + D, D), D, eps)
                wu = fin + 2 * D
            else:
                hf = resid
                wu = fin
            cmask = rK < K
            W_U = tl.load(wu + rD[:, None] * K + rK[None, :], mask=cmask[None, :], other=0.0)
            b_U = tl.load(wu + D * K + rK, mask=cmask, other=0.0)
            if CLS:
                logits = dot(hf, W_U, DOT) + b_U[None, :]  # [BT, KP]
            else:
                logits = tl.sum(hf[:, :, None] * W_U[None, :, :], axis=1) + b_U[None, :]
            logits = tl.where(cmask[None, :], logits, float("-inf"))
            exb = first + tl.arange(0, BT)
            yb = tl.load(y_ptr + e.to(tl.int64) * B + exb, mask=exb < B, other=-1)
            mx = tl.max(logits, axis=1)
            pe = tl.exp(logits - mx[:, None])
            se = tl.sum(pe, axis=1)
            picked = tl.sum(tl.where(rK[None, :] == yb[:, None], logits, 0.0), axis=1)
            loss_acc += tl.sum(tl.where(yb >= 0, mx + tl.log(se) - picked, 0.0), axis=0)
            dlog = pe / se[:, None] - tl.where(rK[None, :] == yb[:, None], 1.0, 0.0)
            dlog = tl.where((yb >= 0)[:, None] & cmask[None, :], dlog * inv_denom, 0.0)
            # ---- backward -----------------------------------------------------------------
            gfin = grd + O_FIN
            if LN:
                gwu = gfin + 2 * D
            else:
                gwu = gfin
            if CLS:
                gram_u = dot_tn(hf, dlog, DOT)  # [D, KP]
            else:
                gram_u = tl.sum(hf[:, :, None] * dlog[:, None, :], axis=0)
            tl.store(gwu + rD[:, None] * K + rK[None, :],
                     tl.load(gwu + rD[:, None] * K + rK[None, :], mask=cmask[None, :], other=0.0)
                     + gram_u, mask=cmask[None, :])
            tl.store(gwu + D * K + rK,
                     tl.load(gwu + D * K + rK, mask=cmask, other=0.0) + tl.sum(dlog, axis=0),
                     mask=cmask)
            if CLS:
                dres = dot_nt(dlog, W_U, DOT)  # [BT, D]
            else:
                dres = tl.sum(dlog[:, None, :] * W_U[None, :, :], axis=2)
            if LN:
                add_vec(gfin, tl.sum(dres * xhatf, axis=0), D)
                add_vec(gfin + D, tl.sum(dres, axis=0), D)
                dres = ln_bwd(dres, xhatf, rstdf, vec(fin, D), D)
            if not CLS:  # the loss reads the residual at CLS alone
                dres = on_cls_rows(dres, BT, P, D)
            for lyr in tl.static_range(L - 1, -1, -1):
                pl = prm + O_L0 + lyr * LSTRIDE
                gl = grd + O_L0 + lyr * LSTRIDE
                sl = scr + lyr * SL
                sq, sprob, sm = layer_scratch(sl, R, D, H, DH, BT, P)
                wq, wk, wv, _, _, _, wo, _, pm = block_params(pl, LN, D, H, DH)
                gq, gk, gv, gbq, gbk, gbv, gwo, gbo, gm = block_params(gl, LN, D, H, DH)
                if F > 0:  # the MLP's backward; dres is the gradient of its output
                    if LN:
                        pm += 2 * D
                        gm += 2 * D
                    spre = sm + R * D + R
                    if CLS and lyr == L - 1:  # one block of rows: the products at once
                        pre = mat(spre, BT, F)
                        add_mat(gm + D * F + F, dot_tn(tl.maximum(pre, 0.0), dres, DOT), F, D)
                    elif not STAGE:  # one product over the tile's rows, from registers
                        pre = mat(spre, R, F)
                        add_mat(gm + D * F + F, dot_tn(tl.maximum(pre, 0.0), dres, DOT), F, D)
                    else:  # from the scratch, 16 rows at a time (add_rows_gram)
                        tl.debug_barrier()  # sres's and sg's last readers are done
                        put(sres, dres, R, D)
                        tl.debug_barrier()
                        add_rows_gram(gm + D * F + F, spre, sres, R, F, D, spre, spre, 2, DOT)
                        pre = mat(spre, R, F)
                    add_vec(gm + 2 * D * F + F, tl.sum(dres, axis=0), D)
                    dpre = tl.where(pre > 0, dot_nt(dres, mat(pm + D * F + F, F, D), DOT), 0.0)
                    if LN:
                        if CLS and lyr == L - 1:
                            xhat2 = mat(sm, BT, D)
                            rstd2 = tl.load(sm + R * D + tl.arange(0, BT))
                        else:
                            xhat2 = mat(sm, R, D)
                            rstd2 = tl.load(sm + R * D + rows)
                        w2 = vec(pm - 2 * D, D)
                    if (CLS and lyr == L - 1) or not STAGE:
                        if LN:
                            h2 = xhat2 * w2[None, :] + vec(pm - D, D)[None, :]
                        elif CLS and lyr == L - 1:
                            h2 = mat(sm, BT, D)
                        else:
                            h2 = mat(sm, R, D)
                        add_mat(gm, dot_tn(h2, dpre, DOT), D, F)
                    else:
                        put(sg, dpre, R, F)
                        tl.debug_barrier()
                        add_rows_gram(gm, sm, sg, R, D, F, pm - 2 * D, pm - D, 1 if LN else 0,
                                      DOT)
                    add_vec(gm + D * F, tl.sum(dpre, axis=0), F)
                    dh2 = dot_nt(dpre, mat(pm, D, F), DOT)
                    if LN:
                        add_vec(gm - 2 * D, tl.sum(dh2 * xhat2, axis=0), D)
                        add_vec(gm - D, tl.sum(dh2, axis=0), D)
                        dh2 = ln_bwd(dh2, xhat2, rstd2, w2, D)
                    dres = dres + dh2
                # the attention's backward; dres is the gradient of the block's mid residual
                add_vec(gbo, tl.sum(dres, axis=0), D)
                if (CLS and lyr == L - 1) or not STAGE:  # the block's input: CLS's queries
                    if LN:  # read it, and the held weight gradients multiply it
                        xhat = mat(sl, R, D)
                        rstd = tl.load(sl + R * D + rows)
                        h = xhat * vec(pl, D)[None, :] + vec(pl + D, D)[None, :]
                    else:
                        h = mat(sl, R, D)
                if CLS and lyr == L - 1:
                    hc = at_cls(h, BT, P, D)
                elif STAGE:
                    tl.debug_barrier()  # sres's last readers are done
                    put(sres, dres, R, D)
                    tl.debug_barrier()
                dh = tl.zeros((R, D), tl.float32)
                for hd in range(H):  # a loop, not unrolled: half the code to compile
                    wo_h = mat(wo + hd * DH * D, DH, D)
                    k = mat(sq + (H + hd) * R * DH, R, DH)
                    v = mat(sq + (2 * H + hd) * R * DH, R, DH)
                    k3 = tl.reshape(k, (BT, P, DH))
                    v3 = tl.reshape(v, (BT, P, DH))
                    sp = sprob + hd * BT * P * P
                    if CLS and lyr == L - 1:
                        q = mat(sq + hd * R * DH, BT, DH)
                        z = mat(sq + (3 * H + hd) * R * DH, BT, DH)
                        pr = mat(sp, BT, P)
                        add_mat(gwo + hd * DH * D, dot_tn(z, dres, DOT), DH, D)
                        dz = dot_nt(dres, wo_h, DOT)  # [BT, DH]
                        dp = tl.sum(dz[:, None, :] * v3, axis=2)  # [BT, P]
                        dv3 = pr[:, :, None] * dz[:, None, :]
                        ds = pr * (dp - tl.sum(pr * dp, axis=1)[:, None]) * scale
                        dq = tl.sum(ds[:, :, None] * k3, axis=1)  # [BT, DH]
                        dk3 = ds[:, :, None] * q[:, None, :]
                        add_mat(gq + hd * D * DH, dot_tn(hc, dq, DOT), D, DH)
                        add_vec(gbq + hd * DH, tl.sum(dq, axis=0), DH)
                        dqh = dot_nt(dq, mat(wq + hd * D * DH, D, DH), DOT)  # [BT, D]
                        dh += on_cls_rows(dqh, BT, P, D)
                    else:
                        q = mat(sq + hd * R * DH, R, DH)
                        pr = tl.reshape(mat(sp, BT * P, P), (BT, P, P))
                        if STAGE:  # dres from the scratch (not held across the heads' loop)
                            add_rows_gram(gwo + hd * DH * D, sq + (3 * H + hd) * R * DH, sres, R,
                                          DH, D, sres, sres, 0, DOT)
                            dz = dot_nt_k(sres, R, D, wo + hd * DH * D, DH, DOT)
                        else:
                            z = mat(sq + (3 * H + hd) * R * DH, R, DH)
                            add_mat(gwo + hd * DH * D, dot_tn(z, dres, DOT), DH, D)
                            dz = dot_nt(dres, wo_h, DOT)
                        dz3 = tl.reshape(dz, (BT, P, DH))
                        dp = tl.dot(dz3, tl.permute(v3, (0, 2, 1)), input_precision=DOT)
                        dv3 = tl.dot(tl.permute(pr, (0, 2, 1)), dz3, input_precision=DOT)
                        ds = pr * (dp - tl.sum(pr * dp, axis=2)[:, :, None]) * scale
                        q3 = tl.reshape(q, (BT, P, DH))
                        dq = tl.reshape(tl.dot(ds, k3, input_precision=DOT), (R, DH))
                        dk3 = tl.dot(tl.permute(ds, (0, 2, 1)), q3, input_precision=DOT)
                        if not STAGE:
                            add_mat(gq + hd * D * DH, dot_tn(h, dq, DOT), D, DH)
                        add_vec(gbq + hd * DH, tl.sum(dq, axis=0), DH)
                        dh += dot_nt(dq, mat(wq + hd * D * DH, D, DH), DOT)
                    dk = tl.reshape(dk3, (R, DH))
                    dv = tl.reshape(dv3, (R, DH))
                    if STAGE:  # from the scratch, 16 rows at a time: h from x̂
                        tl.debug_barrier()  # sg's last readers (the head before, the MLP) are done
                        if not (CLS and lyr == L - 1):
                            put(sg, dq, R, DH)
                        put(sg + R * DH, dk, R, DH)
                        put(sg + 2 * R * DH, dv, R, DH)
                        tl.debug_barrier()
                        if not (CLS and lyr == L - 1):
                            add_rows_gram(gq + hd * D * DH, sl, sg, R, D, DH, pl, pl + D,
                                          1 if LN else 0, DOT)
                        add_rows_gram(gk + hd * D * DH, sl, sg + R * DH, R, D, DH, pl, pl + D,
                                      1 if LN else 0, DOT)
                        add_rows_gram(gv + hd * D * DH, sl, sg + 2 * R * DH, R, D, DH, pl,
                                      pl + D, 1 if LN else 0, DOT)
                        add_vec(gbk + hd * DH, tl.sum(dk, axis=0), DH)
                        add_vec(gbv + hd * DH, tl.sum(dv, axis=0), DH)
                    else:
                        add_mat(gk + hd * D * DH, dot_tn(h, dk, DOT), D, DH)
                        add_vec(gbk + hd * DH, tl.sum(dk, axis=0), DH)
                        add_mat(gv + hd * D * DH, dot_tn(h, dv, DOT), D, DH)
                        add_vec(gbv + hd * DH, tl.sum(dv, axis=0), DH)
                    dh += dot_nt(dk, mat(wk + hd * D * DH, D, DH), DOT)
                    dh += dot_nt(dv, mat(wv + hd * D * DH, D, DH), DOT)
                if LN:
                    if STAGE:  # x̂ read here, not held across the heads' loop
                        xhat = mat(sl, R, D)
                        rstd = tl.load(sl + R * D + rows)
                    add_vec(gl, tl.sum(dh * xhat, axis=0), D)
                    add_vec(gl + D, tl.sum(dh, axis=0), D)
                    dh = ln_bwd(dh, xhat, rstd, vec(pl, D), D)
                if CLS and lyr == L - 1:  # the residual reaches the rows below at CLS only
                    dres = on_cls_rows(dres, BT, P, D) + dh
                elif STAGE:
                    dres = mat(sres, R, D) + dh  # the same values, read back
                else:
                    dres = dres + dh
            # ---- the embeddings: one-hot products sum each token's rows in row order ---------
            # 16 rows at a time from the scratch: a product over all R rows at once ran on the
            # FMA units (fp32) with each thread holding its one-hot rows over all R, half the
            # kernel's spilled registers (bench/gpu_tile_compile.py). The chunks chain one
            # accumulator, so the rows are still added in order.
            tl.debug_barrier()  # sres's last readers (the layers' weight gradients) are done
            put(sres, dres, R, D)
            tl.debug_barrier()  # read back in chunks, by other threads
            r16 = tl.arange(0, 16)
            ge_tile = tl.zeros((VP, D), tl.float32)
            for c in range(R // 16):
                tok_c, real_c = tile_tokens(x_ptr, e, B, first, c * 16 + r16, P, T, V1)
                onehot = tl.where((tok_c[None, :] == rV[:, None]) & real_c[None, :], 1.0, 0.0)
                ge_tile = tl.dot(onehot, mat(sres + c * 16 * D, 16, D), ge_tile,
                                 input_precision="ieee")  # [VP, 16] · [16, D]
            ge = tl.load(grd + rV[:, None] * D + rD[None, :], mask=(rV < V1)[:, None], other=0.0)
            tl.store(grd + rV[:, None] * D + rD[None, :], ge + ge_tile, mask=(rV < V1)[:, None])
            gp = tl.sum(tl.reshape(tl.where(real[:, None], dres, 0.0), (BT, P, D)), axis=0)
            pp = tl.arange(0, P)
            offs = O_POS + pp[:, None] * D + rD[None, :]
            tl.store(grd + offs, tl.load(grd + offs, mask=(pp < T)[:, None], other=0.0) + gp,
                     mask=(pp < T)[:, None])
            # the next tile's forward overwrites the scratch this backward read, and adds to the
            # gradient sums it wrote (a replicated value is stored by one of its threads)
            tl.debug_barrier()
    tl.store(loss_ptr + e * n_prog + s + tl.arange(0, 1), loss_acc * inv_denom)

