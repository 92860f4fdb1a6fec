// Run identity: the config the run used against what it was launched with, toy models, synthetic data.
// Each rule is a pure function of the evaluation context (src/checks/context.ts).
import type { Ctx } from '../context.js';
import { claims125m, configBasename, isToyModel, knownConfig } from '../flops.js';
import { sig } from '../../format.js';
import { currentSegment, median } from '../stats.js';
import { type Draft, a } from './common.js';
import { envJsonRead } from '../waits.js';

export function ruleIdentity(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const id = ctx.run.identity;
  const launched = ctx.in.launched;
  const real = id.trainer === 'nsa-vibe';
  const cfg = id.config;
  if (launched?.config && cfg !== undefined) {
    const want = configBasename(launched.config),
      got = configBasename(cfg);
    if (want !== got) {
      out.push(
        a(
          'identity:config',
          'run-identity',
          'critical',
          `launched with config ${launched.config} but the run used ${cfg ?? 'the toy default (no CONFIG in env.json)'}`,
          'the trainer reads its config only from the CONFIG env var; --config is silently ignored (contract §0)',
          { anomaly: 'wrong_config' },
        ),
      );
    }
  } else if (real && cfg === null && ctx.run.exists && ctx.ranks.length > 0 && envJsonRead(ctx)) {
    out.push(
      a(
        'identity:no-config',
        'run-identity',
        'warning',
        'env.json has no CONFIG: the trainer loaded its toy default configs/train_showcase.yaml',
        'a 50k run once trained the toy model for 24 h this way (contract §8.4); export CONFIG=configs/<name>.yaml',
      ),
    );
  }
  if (launched?.flags) {
    for (const [k, v] of Object.entries(launched.flags)) {
      const got = id.flags[k];
      if (got !== undefined && got !== v) {
        out.push(
          a(
            `identity:flag:${k}`,
            'run-identity',
            'warning',
            `${k}=${got} in env.json, launched with ${k}=${v}`,
            'env.json records the environment the trainer actually saw',
          ),
        );
      } else if (got === undefined && Object.keys(id.flags).length > 0 && /^NSA_/.test(k)) {
        out.push(
          a(
            `identity:flag:${k}`,
            'run-identity',
            'warning',
            `${k}=${v} was asked for but is absent from env.json`,
            'the variable did not reach the trainer process',
          ),
        );
      }
    }
  }
  // The named config and the model disagree, or the toy model runs under a 125M name.
  const known = knownConfig(cfg);
  const model = id.model;
  const seq = id.train?.seqLen ?? null;
  const toy = isToyModel(model, seq) || (real && cfg === null && envJsonRead(ctx));
  const claimName = claims125m(cfg) ? cfg : claims125m(launched?.config) ? launched!.config! : null;
  if (model && known && !known.toy && (model.dim !== known.model.dim || model.nLayers !== known.model.nLayers)) {
    out.push(
      a(
        'identity:dims',
        'run-identity',
        'critical',
        `config ${configBasename(cfg)} names a dim ${known.model.dim} × ${known.model.nLayers}-layer model but the run has dim ${model.dim} × ${model.nLayers}`,
        'the run is not the model its name says',
        { anomaly: 'wrong_config' },
      ),
    );
  } else if (toy && claimName) {
    out.push(
      a(
        'identity:toy',
        'run-identity',
        'critical',
        `toy model (dim ${model?.dim ?? 128}, ${model?.nLayers ?? 1} layer, S=${seq ?? 128}) running under the 125M name ${configBasename(claimName)}`,
        `contract §8.4: CONFIG ${cfg ?? 'absent'}${ctx.run.checkpoints.length === 0 ? ', no checkpoints' : ''}${id.dtype ? `, dtype ${id.dtype}` : ''}`,
        { anomaly: 'wrong_config' },
      ),
    );
  } else if (!model && real) {
    // Dims unknown (the real trainer writes no config into out_dir): the other tells of §8.4.
    const ev = toyTells(ctx);
    if (ev.length >= 2 && (claimName || (ctx.run.totalSteps ?? 0) >= 5000)) {
      out.push(
        a(
          'identity:toy',
          'run-identity',
          claimName ? 'critical' : 'warning',
          `this looks like the toy config${claimName ? ` running under the 125M name ${configBasename(claimName)}` : ` on a ${ctx.run.totalSteps}-step run`}`,
          `contract §8.4 tells: ${ev.join('; ')}`,
          claimName ? { anomaly: 'wrong_config' } : {},
        ),
      );
    }
  }
  out.push(...ruleSyntheticData(ctx));
  return out;
}

/** The toy config's other fingerprints (contract §8.4) when the model dims are not known. */
function toyTells(ctx: Ctx): string[] {
  const id = ctx.run.identity;
  const out: string[] = [];
  const seq = id.train?.seqLen ?? null;
  if (seq !== null && seq <= 128) out.push(`seq_len ${seq}`);
  if (id.config === null && envJsonRead(ctx)) out.push('no CONFIG in env.json');
  const mem = ctx.run.lastProgress?.gpuMemReservedMiB ?? ctx.ranks.find((r) => r.rank === 0)?.memReservedMiB ?? null;
  if (mem !== null && mem < 200 && (ctx.run.step ?? 0) >= 10)
    out.push(`GPU memory reserved only ${Math.round(mem)} MiB`);
  if (id.dtype && /float32|fp32/i.test(id.dtype) && (id.gpuName || mem !== null))
    out.push(`dtype ${id.dtype} on a GPU`);
  if (id.train?.saveEvery === 0) out.push('save_every 0 (no checkpoints)');
  if (/\[boot\] loading config configs\/train_showcase\.yaml/.test(ctx.run.log.lines.join('\n')))
    out.push('train.log: "[boot] loading config configs/train_showcase.yaml"');
  return out;
}

function ruleSyntheticData(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const id = ctx.run.identity;
  const ds = (ctx.in.launched?.dataset ?? id.dataset ?? null)?.toLowerCase() ?? null;
  const logged = id.dataset?.toLowerCase() ?? null;
  const synthetic = logged === 'synthetic';
  const claimsReal = !!ds && ds !== 'synthetic';
  const d = ctx.run.data;
  const progressed = d.withFetch + d.withoutFetch > 0;
  if (claimsReal && progressed && (d.dtFetchAbsent || d.syntheticFallback)) {
    out.push(
      a(
        'data:synthetic-tell',
        'synthetic-data',
        'critical',
        `dataset says ${ds} but the run trains on random tokens${d.syntheticFallback ? ' (loader fell back to synthetic)' : ' (no dt_fetch_s in recent progress records)'}`,
        `${d.withFetch} progress records with dt_fetch_s, ${d.withoutFetch} without; a dead prefetch thread or --dataset fineweb_edu_local silently trains on random tokens (contract §8.6)`,
        { anomaly: 'synthetic_data' },
      ),
    );
  } else if (synthetic) {
    out.push(
      a(
        'data:synthetic',
        'synthetic-data',
        'warning',
        'training on synthetic random tokens (train.log: dataset=synthetic)',
        `loss cannot fall below ln(vocab) (${sig(Math.log(id.model?.vocab ?? 256), 4)}); loss and throughput say nothing about real data${d.dtFetchAbsent ? '; no dt_fetch_s in progress records' : ''}`,
        // the dataset is chosen at launch: true since this segment of the run started, not since
        // the cockpit noticed
        { since: ctx.run.segments.at(-1)?.startTs ?? undefined },
      ),
    );
  }
  // Loss pinned near ln(vocab): the random-data tell once the run is past its early steps.
  const vocab =
    id.model?.vocab ??
    (id.tokenizer === 'gpt2' ? 50257 : id.tokenizer === 'byte' || id.tokenizer === null ? 256 : null);
  const pts = currentSegment(ctx.run.series.loss);
  const last = pts[pts.length - 1];
  if (vocab && last && last.step >= ctx.t.lossPinnedMinStep && pts.length >= 10) {
    const lnV = Math.log(vocab);
    const tail = pts.slice(-Math.min(pts.length, ctx.t.rollingWindow)).map((p) => p.value);
    const med = median(tail)!;
    if (Math.abs(med - lnV) < ctx.t.lossPinnedEps && Math.min(...tail) > lnV - ctx.t.lossPinnedEps) {
      out.push(
        a(
          'loss:pinned-lnV',
          'synthetic-data',
          claimsReal && !synthetic ? 'critical' : 'warning',
          `loss pinned at ${sig(med, 4)} ≈ ln(${vocab}) = ${sig(lnV, 4)} at step ${last.step}: the model sees random tokens`,
          `median of the last ${tail.length} losses within ${ctx.t.lossPinnedEps} of ln(vocab); dataset ${ds ?? 'unknown'}`,
          { step: last.step, anomaly: claimsReal && !synthetic ? 'synthetic_data' : undefined },
        ),
      );
    }
  }
  return out;
}
