"""Language server latency: from a `didChange` on a 2,000-line model file to its fresh diagnostics.

A real LSP client (pygls) starts `python -m devlint server`, opens the file, then sends edits
one at a time (full-text changes, as the server asks for) and times each until the
`publishDiagnostics` for that version arrives. The debounce is set to 0 for the measure
(`--debounce 0`); `--debounce S` measures with another value, and the table then also gives
each time less the debounce. For comparison it times `Linter.check` on the same text in this
process: the engine's share.

    python bench/server.py [--runs 20] [--lines 2000] [--debounce 0] [--keep FILE]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

HEADER = '''"""Vision and sequence models, their data pipeline and training loop."""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
'''

# One family of modules; each copy gets its own suffix and sizes. The findings sit in the
# first copy only (a hardcoded `.cuda()`, an unregistered tensor attribute, `torch.load`
# without `map_location`, a CPU tensor made in forward).
UNIT = '''

@dataclass
class Config{n}:
    dim: int = {dim}
    heads: int = {heads}
    depth: int = {depth}
    mlp_ratio: float = 4.0
    dropout: float = 0.1
    num_classes: int = {classes}
    patch: int = 16
    image_size: int = 224


class Attention{n}(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        assert dim % heads == 0, "dim must divide into heads"
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        if mask is not None:
            attn = attn.masked_fill(~mask[:, None, None, :], float("-inf"))
        attn = self.drop(attn.softmax(dim=-1))
        out = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(out)


class Mlp{n}(nn.Module):
    def __init__(self, dim: int, hidden: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class Block{n}(nn.Module):
    def __init__(self, cfg: Config{n}) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.attn = Attention{n}(cfg.dim, cfg.heads, cfg.dropout)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.mlp = Mlp{n}(cfg.dim, int(cfg.dim * cfg.mlp_ratio), cfg.dropout)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), mask)
        return x + self.mlp(self.norm2(x))


class PatchEmbed{n}(nn.Module):
    def __init__(self, cfg: Config{n}) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, cfg.dim, kernel_size=cfg.patch, stride=cfg.patch)
        grid = cfg.image_size // cfg.patch
        self.register_buffer("positions", torch.zeros(1, grid * grid, cfg.dim), persistent=False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.proj(images).flatten(2).transpose(1, 2)
        return x + self.positions[:, : x.shape[1]]


class VisionTransformer{n}(nn.Module):
    def __init__(self, cfg: Config{n}) -> None:
        super().__init__()
        self.embed = PatchEmbed{n}(cfg)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.blocks = nn.ModuleList([Block{n}(cfg) for _ in range(cfg.depth)])
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.num_classes)
{finding_init}
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.embed(images)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1)
        for block in self.blocks:
            x = block(x)
{finding_forward}        return self.head(self.norm(x)[:, 0])


class ConvStage{n}(nn.Module):
    def __init__(self, cin: int, cout: int, blocks: int = 2) -> None:
        super().__init__()
        layers = []
        for i in range(blocks):
            layers += [
                nn.Conv2d(cin if i == 0 else cout, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
            ]
        self.body = nn.Sequential(*layers)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.skip(x))


class ImageDataset{n}(Dataset):
    def __init__(self, root: str, size: int = 224, train: bool = True) -> None:
        self.files = sorted(Path(root).glob("*.npy"))
        self.size = size
        self.train = train

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int):
        array = np.load(self.files[index]).astype(np.float32) / 255.0
        image = torch.from_numpy(array).permute(2, 0, 1)
        if self.train and torch.rand(()) < 0.5:
            image = image.flip(-1)
        label = int(self.files[index].stem.split("_")[-1])
        return F.interpolate(image[None], size=self.size)[0], label


def cosine_schedule{n}(step: int, total: int, warmup: int = 500) -> float:
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def evaluate{n}(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            correct += (logits.argmax(-1) == labels).sum().item()
            total += labels.numel()
    return correct / max(1, total)


def train{n}(args: argparse.Namespace) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg = Config{n}()
    model = VisionTransformer{n}(cfg).to(device)
{finding_train}    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    loader = DataLoader(ImageDataset{n}(args.data), batch_size=args.batch_size, shuffle=True, num_workers=4)
    total = args.epochs * len(loader)
    step = 0
    for epoch in range(args.epochs):
        model.train()
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            for group in optimizer.param_groups:
                group["lr"] = args.lr * cosine_schedule{n}(step, total)
            loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
        accuracy = evaluate{n}(model, loader, device)
        print(f"epoch {{epoch}}: loss {{loss.item():.4f}}, accuracy {{accuracy:.3f}}")
        torch.save(model.state_dict(), f"{{args.out}}/vit{n}_{{epoch}}.pt")
'''

FINDINGS = {
    "finding_init": "        self.class_weights = torch.ones(cfg.num_classes)\n",
    "finding_forward": "        noise = torch.randn(x.shape)\n        x = x + 0.01 * noise\n",
    "finding_train": "    model.load_state_dict(torch.load(args.resume))\n    model.cuda()\n",
}
QUIET = {key: "" for key in FINDINGS}


def model_file(lines: int) -> str:
    """Model code of at least `lines` lines: whole copies of UNIT with their own names and sizes."""
    parts, n = [HEADER, "from pathlib import Path\n"], 0
    while sum(p.count("\n") for p in parts) < lines:
        sizes = dict(dim=256 + 64 * (n % 8), heads=4 + 2 * (n % 3), depth=6 + n % 7, classes=10 + 90 * (n % 3))
        parts.append(UNIT.format(n=n, **sizes, **(FINDINGS if n == 0 else QUIET)))
        n += 1
    return "".join(parts)


async def measure(path: Path, text: str, runs: int, debounce: float) -> tuple[list[float], int]:
    client = LanguageClient("devlint-bench", "1")
    published: dict[int, float] = {}
    counts: dict[int, int] = {}
    arrived = asyncio.Condition()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    async def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        async with arrived:
            published[params.version] = time.perf_counter()
            counts[params.version] = len(params.diagnostics)
            arrived.notify_all()

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    await client.start_io(sys.executable, "-m", "devlint", "server", "--debounce", str(debounce),
                          cwd=str(path.parent), env=env)
    await client.initialize_async(types.InitializeParams(
        process_id=os.getpid(), root_uri=from_fs_path(str(path.parent)), capabilities=types.ClientCapabilities()))
    client.initialized(types.InitializedParams())
    uri = from_fs_path(str(path))

    async def wait_for(version: int) -> None:
        async with arrived:
            await asyncio.wait_for(arrived.wait_for(lambda: version in published), 60)

    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    await wait_for(1)
    times = []
    for run in range(runs):
        version = run + 2
        new = edited(text, run)
        sent = time.perf_counter()
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=new)]))
        await wait_for(version)
        times.append(published[version] - sent)
    findings = counts[runs + 1]
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return times, findings


def edited(text: str, run: int) -> str:
    lines = text.split("\n")
    at = 40 + 7 * run  # a different line each time: a comment typed into model code
    lines[at] = lines[at] + f"  # note {run}"
    return "\n".join(lines)


def engine_times(path: Path, text: str, runs: int, reuse: bool) -> tuple[list[float], list[float]]:
    """(wall, CPU) seconds of the server's check of each edit, in this process: with the chunks
    of the previous text reused (as the server does) or a whole-file parse each time."""
    from devlint.engine.incremental import ChunkParser
    from devlint.workspace.config import find_config, load_settings
    from devlint.workspace.linter import Linter

    settings = load_settings(find_config(path.parent), path.parent, start=path)
    parser = ChunkParser()
    parse = parser.parse if reuse else None
    Linter(settings, path, parse=parse).check(text)
    wall, cpu = [], []
    for run in range(runs):
        new = edited(text, run)
        start, start_cpu = time.perf_counter(), time.thread_time()
        Linter(settings, path, parse=parse).check(new)
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--debounce", type=float, default=0.0, help="the server's debounce (default 0)")
    parser.add_argument("--keep", type=Path, help="also write the model file here")
    args = parser.parse_args()
    text = model_file(args.lines)
    if args.keep:
        args.keep.write_text(text, encoding="utf-8")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "models.py"
        path.write_text(text, encoding="utf-8")
        times, findings = asyncio.run(measure(path, text, args.runs, args.debounce))
        reuse_wall, reuse_cpu = engine_times(path, text, args.runs, reuse=True)
        whole_wall, whole_cpu = engine_times(path, text, args.runs, reuse=False)
    print(f"{text.count(chr(10))} lines, {findings} findings; {args.runs} edits; debounce {args.debounce} s; "
          f"{os.cpu_count()} cores; Python {sys.version.split()[0]}; load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
    rows = [("didChange -> publishDiagnostics", times)]
    if args.debounce:
        rows.append(("  less the debounce", [t - args.debounce for t in times]))
    rows += [("check, chunks reused (wall)", reuse_wall), ("check, chunks reused (CPU)", reuse_cpu),
             ("check, whole-file parse (wall)", whole_wall), ("check, whole-file parse (CPU)", whole_cpu)]
    print(f"{'':<34}{'median s':>10}{'max s':>10}")
    for label, values in rows:
        print(f"{label:<34}{statistics.median(values):>10.3f}{max(values):>10.3f}")
    target = statistics.median(times) - args.debounce
    print(f"median (less the debounce) < 0.5 s: {'met' if target < 0.5 else 'NOT MET'}")


if __name__ == "__main__":
    main()
