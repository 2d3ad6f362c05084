"""`devlint confirm` for DEV007-DEV015 on the stand-in device: each rule shown by a module run
(DEV014 and DEV015: by building the module a script builds), the variants a run clears, and the
findings no module run reaches."""

import pytest

from helpers import confirm_run, statuses

torch = pytest.importorskip("torch")


def confirm(tmp_path, source, *args, name="models.py"):
    """(code, row, confirm record) per finding; rows count from the line after HEADER."""
    return confirm_run(tmp_path, source, "--device", "stand-in", *args, name=name)[0]



MIX = "Expected all tensors to be on the same device"  # CUDA's words; the rest names the op's arguments


def test_dev009_modules_in_a_plain_list_stay_behind(tmp_path):
    results = confirm(tmp_path, """
        class Heads(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.heads = [nn.Linear(8, 8) for _ in range(2)]

            def forward(self, x):
                x = self.proj(x)
                for head in self.heads:
                    x = head(x)
                return x


        class Scales(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.scales = [nn.Parameter(torch.ones(8))]

            def forward(self, x):
                return self.proj(x) * self.scales[0]


        class Activations(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.acts = [nn.ReLU(), nn.Tanh()]

            def forward(self, x):
                for act in self.acts:
                    x = act(x)
                return self.proj(x)


        class Registered(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])

            def forward(self, x):
                for head in self.heads:
                    x = head(x)
                return x
    """, "--select", "DEV009")
    # `Activations` holds only stateless modules: not flagged (a run would not reproduce it either)
    assert statuses(results) == [("DEV009", 6, "confirmed"), ("DEV009", 19, "confirmed")]
    heads, scales = (r[2] for r in results)
    assert heads["message"].startswith("when the module was moved, the 4 tensors (144 values) of the Linear in self.heads stayed on cpu")
    assert "model.parameters() does not list them" in heads["message"]
    assert MIX in heads["message"] and "(when checking argument in method wrapper_CUDA_addmm)" in heads["message"]
    assert heads["use"] == {"row": 15} and heads["origin"] == {"row": 10}  # the head(x) call, the list (file rows)
    assert "the 1 tensor (8 values) of the Parameter in self.scales stayed on cpu" in scales["message"]
    assert MIX in scales["message"] and scales["use"] == {"row": 26}


def test_dev010_a_dropped_move_leaves_the_tensor_where_it_was(tmp_path):
    results = confirm(tmp_path, """
        class Dropped(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                bias = torch.ones(8) * 2
                bias.to(x.device)
                return self.proj(x) + bias


        class AlreadyThere(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                x.to(self.proj.weight.device)
                return self.proj(x)


        class Assigned(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                bias = torch.ones(8) * 2
                bias = bias.to(x.device)
                return self.proj(x) + bias
    """, "--select", "DEV010")
    assert statuses(results) == [("DEV010", 9, "confirmed"), ("DEV010", 19, "not-reproduced")]
    dropped, already = results[0][2], results[1][2]
    assert ".to() at line 13 returned a copy on cuda:0, and the tensor itself stayed on cpu" in dropped["message"]
    assert MIX in dropped["message"]
    assert dropped["use"] == {"row": 14} and dropped["origin"] == {"row": 12}  # the add; where bias was made
    assert "was on cuda:0 already" in already["message"]


def test_dev011_cuda_only_calls_are_recorded_and_the_run_goes_on(tmp_path):
    results = confirm(tmp_path, """
        class Synced(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                y = self.proj(x)
                torch.cuda.synchronize()
                return y + torch.arange(8)


        class Named(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.name = torch.cuda.get_device_name()

            def forward(self, x):
                return self.proj(x)


        class Guarded(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                else:
                    x = x + torch.ones(8)
                return self.proj(x)


        class Unused(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                return self.proj(x)

            def timed(self, x):
                torch.cuda.synchronize()
                return self.proj(x)
    """, "--select", "DEV011,DEV003")
    assert statuses(results) == [
        ("DEV011", 9, "confirmed"), ("DEV003", 10, "confirmed"), ("DEV011", 17, "confirmed"),
        ("DEV003", 32, "not-reached"), ("DEV011", 45, "not-reached"),
    ]
    synced, named = results[0][2], results[2][2]
    assert synced["message"] == ("in a training-mode forward: torch.cuda.synchronize() was called; on a CPU-only host "
                                 "(the CPU build of torch) it raises AssertionError: Torch not compiled with CUDA enabled")
    assert synced["use"] == {"row": 13}
    # the stand-in answers synchronize() as a GPU host would: the forward went on to the mix below it
    assert MIX in results[1][2]["message"]
    assert named["message"].startswith("while building the module: torch.cuda.get_device_name() was called")
    # the stand-in plays a GPU host: torch.cuda.is_available() is True, so the guarded branch ran
    # and the CPU-only branch did not, as on a GPU
    assert results[3][2]["message"].startswith("line 36 did not run")  # the file's own row (the header is 4 lines)


def test_dev012_a_device_kept_from_init_is_left_behind_by_a_move(tmp_path):
    results = confirm(tmp_path, """
        class BuiltOnCpu(nn.Module):
            def __init__(self, device="cpu"):
                super().__init__()
                self.proj = nn.Linear(8, 8, device=device)
                self.device = device

            def forward(self, x):
                noise = torch.randn(x.shape, device=self.device)
                return self.proj(x + noise)


        class BuiltForGpu(nn.Module):
            def __init__(self, dim=8, device="cuda"):
                super().__init__()
                self.proj = nn.Linear(dim, dim, device=device)
                self.device = torch.device(device)

            def forward(self, x):
                noise = torch.zeros(
                    x.shape,
                    device=self.device,
                )
                return self.proj(x + noise)


        class FollowsInput(nn.Module):
            def __init__(self, device="cpu"):
                super().__init__()
                self.proj = nn.Linear(8, 8, device=device)
                self.device = device

            def forward(self, x):
                noise = torch.randn(x.shape, device=x.device)
                return self.proj(x + noise)
    """, "--select", "DEV012")
    assert statuses(results) == [("DEV012", 9, "confirmed"), ("DEV012", 22, "confirmed")]
    cpu, gpu = results[0][2], results[1][2]
    assert "the tensor placed with self.device at line 13 was made on cpu, where the module was built" in cpu["message"]
    assert MIX in cpu["message"]
    assert cpu["use"] == {"row": 14} and cpu["origin"] == {"row": 13}
    assert gpu["message"].startswith('built for the GPU (device="cuda") and moved back to the CPU: the tensor placed '
                                     "with self.device at line 26 was made on the GPU while the weights were on cpu")
    assert MIX in gpu["message"] and gpu["use"] == {"row": 28}


def test_dev012_confirmed_by_an_op_that_checks_devices_itself(tmp_path):
    # meshgrid raises its own device error (real CUDA says the same) before any mix is recorded
    results = confirm(tmp_path, """
        class CoordRefiner(nn.Module):
            def __init__(self, device="cpu"):
                super().__init__()
                self.device = torch.device(device)
                self.mix = nn.Conv2d(6, 4, kernel_size=3, padding=1, device=self.device)

            def forward(self, logits):
                b, _, h, w = logits.shape
                ys = torch.linspace(-1.0, 1.0, h, device=self.device)
                xs = torch.linspace(-1.0, 1.0, w, device=logits.device)
                grid = torch.stack(torch.meshgrid(ys, xs, indexing="ij")).expand(b, -1, -1, -1)
                return logits + self.mix(torch.cat([logits, grid], dim=1))
    """, "--select", "DEV012")
    assert statuses(results) == [("DEV012", 10, "confirmed")]
    message = results[0][2]["message"]
    assert "the tensor placed with self.device at line 14 was made on cpu" in message
    assert "meshgrid expects all tensors to have the same device" in message


def test_dev007_data_not_moved_in_a_module_method(tmp_path):
    results = confirm(tmp_path, """
        class Noisy(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x, device="cuda"):
                h = x.to(device)
                noise = torch.randn(2, 8)
                return self.proj(h + noise)


        class OnTheCpu(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x, device=torch.device("cpu")):
                h = x.to(device)
                noise = torch.randn(2, 8)
                return h * noise


        class Fixed(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x, device="cuda"):
                h = x.to(device)
                noise = torch.randn(2, 8, device=device)
                return self.proj(h + noise)
    """, "--select", "DEV007")
    assert statuses(results) == [("DEV007", 9, "confirmed"), ("DEV007", 20, "not-reproduced")]
    noisy, cpu = results[0][2], results[1][2]
    assert MIX in noisy["message"] and noisy["use"] == {"row": 14} and noisy["origin"] == {"row": 13}
    assert "never met a tensor on another device" in cpu["message"]


def test_dev008_numpy_on_a_device_tensor(tmp_path):
    results = confirm(tmp_path, """
        class Stats(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x, device="cuda"):
                h = x.to(device)
                self.stats = h.detach().numpy()
                return self.proj(h)

            def export(self, x, device: torch.device):
                return x.to(device).numpy()


        class Fixed(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x, device="cuda"):
                h = x.to(device)
                self.stats = h.detach().cpu().numpy()
                return self.proj(h)
    """, "--select", "DEV008")
    assert statuses(results) == [("DEV008", 9, "confirmed"), ("DEV008", 13, "not-reached")]
    stats = results[0][2]
    assert stats["message"] == (
        "in a training-mode forward: .numpy() got a tensor on cuda:0; on CUDA this raises TypeError: can't convert "
        "cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.")


def test_code_no_module_run_reaches_is_not_run_with_the_reason(tmp_path):
    results = confirm(tmp_path, """
        def shifted(x):
            bias = torch.ones(8)
            bias.to(x.device)
            return x + bias


        def train(model, loader):
            for images in loader:
                images.to("cuda")
                model(images)
            torch.cuda.synchronize()


        class Shift(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                return shifted(self.proj(x))


        if __name__ == "__main__":
            batch = torch.ones(2, 8)
            batch.cuda()
            torch.cuda.synchronize()
    """, "--select", "DEV010,DEV011")
    assert statuses(results) == [
        ("DEV010", 4, "confirmed"), ("DEV010", 10, "not-run"), ("DEV011", 12, "not-run"),
        ("DEV010", 26, "not-run"), ("DEV011", 27, "not-run"),
    ]
    messages = [c["message"] for _, _, c in results]
    # a plain function that a module's forward calls is run and judged
    assert ".to() at line 8 returned a copy on cuda:0, and the tensor itself stayed on cpu" in messages[0]
    assert messages[1] == ("DEV010 at line 14 is in the function train(), which no module run reached; "
                           "only nn.Module classes are built and run")
    assert messages[3] == "DEV010 at line 30 is in script code that confirm does not run; only nn.Module classes are built and run"


def test_unreached_lines_of_a_called_function_and_after_a_copy_to_the_host(tmp_path):
    source = """
        def shifted(x, scale=None):
            bias = torch.ones(8)
            bias.to(x.device)
            if scale is not None:
                torch.cuda.synchronize()
            return x + bias


        class Shift(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                return shifted(self.proj(x))


        class Branch(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                if x.cpu().sum() > 0:
                    torch.cuda.synchronize()
                return self.proj(x)
    """
    results = confirm(tmp_path, source, "--select", "DEV011", "--values", "never")
    # shifted() ran (called by Shift.forward), so its skipped line is not-reached, not not-run
    assert statuses(results) == [("DEV011", 6, "not-reached"), ("DEV011", 26, "inconclusive")]
    assert results[1][2]["message"] == ("line 30 did not run, but on the stand-in the copies to the host at line 29 "
                                        "hold zeros, so a branch on their values may have gone another way")
    # by default a run whose host copies were zeros is run again with values: the branch is
    # decided by the data (zeros in, so it is not taken)
    results = confirm(tmp_path, source, "--select", "DEV011")
    assert statuses(results) == [("DEV011", 6, "not-reached"), ("DEV011", 26, "not-reached")]


@pytest.mark.skipif(torch.version.cuda is not None, reason="the messages are the CPU build's")
def test_dev011_cuda_types_and_contexts_fail_by_themselves(tmp_path):
    """set_device is played (a no-op on the stand-in) and recorded; streams, device contexts and
    legacy types raise on the CPU build as they are, and the failure is charged to its line."""
    results = confirm(tmp_path, """
        class Streamed(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                torch.cuda.set_device(0)
                stream = torch.cuda.Stream()
                return self.proj(x)


        class InDevice(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                with torch.cuda.device(0):
                    return self.proj(x)


        class Legacy(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                return self.proj(x) + torch.cuda.FloatTensor(8).zero_()
    """, "--select", "DEV011")
    assert statuses(results) == [("DEV011", row, "confirmed") for row in (8, 9, 19, 29)]
    messages = [c["message"] for _, _, c in results]
    assert messages == [
        "in a training-mode forward: torch.cuda.set_device() was called; on a CPU-only host (the CPU build of torch) "
        "it raises AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'",
        "in a training-mode forward: RuntimeError: torch.cuda.Stream requires CUDA support",
        "in a training-mode forward: RuntimeError: PyTorch was compiled without CUDA support",
        "in a training-mode forward: TypeError: type torch.cuda.FloatTensor not available. Torch not compiled with CUDA enabled.",
    ]


def test_dev013_a_layer_built_in_forward_meets_the_input_with_cpu_weights(tmp_path):
    results = confirm(tmp_path, """
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())

            def forward(self, images):
                x = self.features(images)
                x = nn.BatchNorm2d(8)(x)
                head = nn.Linear(8, 4)
                return head(x.mean((2, 3)))


        class MovedToTheCpu(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                return nn.Linear(8, 8).to("cpu")(self.proj(x))
    """, "--select", "DEV013")
    assert statuses(results) == [("DEV013", 9, "confirmed"), ("DEV013", 10, "confirmed"), ("DEV013", 20, "confirmed")]
    norm, head = results[0][2], results[1][2]
    assert norm["message"].startswith("the module built at line 13 made its weights on cpu; ") and MIX in norm["message"]
    assert head["use"] == {"row": 15} and head["origin"] == {"row": 14}  # rows of the file: after the header


def test_dev014_dev015_the_module_a_script_builds_is_built_and_called_on_device_inputs(tmp_path):
    results = confirm(tmp_path, """
        CLASS_WEIGHTS = [1.0, 1.0, 4.0]


        def train(loader, device):
            model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).to(device)
            model.add_module("head", nn.Linear(8, 3))
            criterion = nn.CrossEntropyLoss(weight=torch.tensor(CLASS_WEIGHTS))
            probe = nn.Linear(8, 3)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                out = model(x)
                loss = criterion(out, y) + probe(x).sum()
            return loss


        def finetune(model, loader, device, num_classes):
            model.to(device)
            model.fc = nn.Linear(model.fc.in_features, num_classes)
            for x, y in loader:
                model(x.to(device))


        def parallel(device):
            net = nn.Linear(8, 8)
            return nn.DataParallel(net)
    """, "--select", "DEV014,DEV015")
    assert statuses(results) == [
        ("DEV014", 7, "confirmed"), ("DEV015", 8, "confirmed"), ("DEV015", 9, "confirmed"),
        ("DEV014", 19, "not-run"), ("DEV015", 26, "not-run"),
    ]
    head, loss, probe, replaced, wrapped = (c for _, _, c in results)
    assert head["message"].startswith("the module built at line 11 holds weight, bias on cpu; called on inputs on the device")
    assert MIX in head["message"] and MIX in probe["message"]
    assert "holds weight on cpu" in loss["message"] and "(scores and class targets: 2x3, 2 int64)" in loss["message"]
    assert MIX in loss["message"]
    assert replaced["message"].startswith("the module built at line 23 needs 'model', a name of the code around it")
    assert "script code that confirm does not run" in wrapped["message"] or "no module run reached" in wrapped["message"]



# --- real CUDA: runs where a GPU is present -------------------------------------------------------
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_dev013_dev015_real_cuda_agrees_with_the_stand_in(tmp_path):
    source = """
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                return nn.LayerNorm(8)(self.proj(x))


        def train(loader, device):
            model = Classifier().to(device)
            criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0]))
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss = criterion(model(x)[:, :2], y)
    """
    stand_in = statuses(confirm(tmp_path, source, "--device", "stand-in", "--select", "DEV013,DEV015"))
    real = confirm(tmp_path, source, "--device", "cuda", "--select", "DEV013,DEV015")
    assert statuses(real) == stand_in == [("DEV013", 8, "confirmed"), ("DEV015", 13, "confirmed")]
    assert all(c["device"].startswith("cuda") and MIX in c["message"] for _, _, c in real)
