"""Third-party trainers as users run them, for tests/gpu_planted_test.sh: no marks of ours, no
change to their code. Each trains a small model on random data for a few dozen optimizer steps
after its usual start-up (model build, compile, data loader), which analyze must keep out of
the steady state.

  python3 trainers.py gpt2|lightning|timm [--steps N]

  gpt2       transformers' Trainer on a GPT-2 built from a small config (no download)
  lightning  PyTorch Lightning's Trainer on an MLP
  timm       a timm ResNet-18 under torch.compile, a plain training loop
"""
import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, vocab, (n, seq), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


def gpt2(steps):
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    cfg = GPT2Config(n_layer=4, n_head=8, n_embd=512, vocab_size=8192, n_positions=256)
    model = GPT2LMHeadModel(cfg)
    args = TrainingArguments(output_dir="/tmp/cuptrace-gpt2", per_device_train_batch_size=16,
                             max_steps=steps, report_to=[], save_strategy="no",
                             logging_strategy="no", disable_tqdm=True,
                             dataloader_num_workers=0)
    Trainer(model=model, args=args, train_dataset=Tokens(16 * steps, 256, 8192)).train()


def lightning(steps):
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl

    class Net(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                         torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                         torch.nn.Linear(4096, 10))

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.m(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    g = torch.Generator().manual_seed(0)
    ds = torch.utils.data.TensorDataset(torch.randn(512 * steps, 1024, generator=g),
                                        torch.randint(0, 10, (512 * steps,), generator=g))
    dl = torch.utils.data.DataLoader(ds, batch_size=512)
    pl.Trainer(max_steps=steps, accelerator="gpu", devices=1, logger=False,
               enable_checkpointing=False, enable_progress_bar=False,
               enable_model_summary=False).fit(Net(), dl)


def timm_compile(steps):
    import timm

    model = timm.create_model("resnet18", pretrained=False, num_classes=100).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    f = torch.compile(model)
    x = torch.randn(64, 3, 160, 160, device="cuda")
    y = torch.randint(0, 100, (64,), device="cuda")
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(f(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trainer", choices=["gpt2", "lightning", "timm"])
    p.add_argument("--steps", type=int, default=40)
    a = p.parse_args()
    {"gpt2": gpt2, "lightning": lightning, "timm": timm_compile}[a.trainer](a.steps)
    print(f"trainer {a.trainer}: {a.steps} steps", file=sys.stderr)


if __name__ == "__main__":
    main()
