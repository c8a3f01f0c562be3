//! neon's `DeconvCallback` (neon/callbacks/callbacks.py: `DeconvCallback.on_train_end`,
//! `get_layer_acts`, `store_images`, `visualize_layer`, `scale_to_rgb`): the `deconv` group of the
//! callback data file read back by h5py, checked against neon's algorithm written in numpy.

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Tensor, TensorData};
use burn_stoker::monitor::{CallbackDataWriter, ConvLayers, Deconv};
use burn_stoker::prelude::*;
use serde_json::{Value as Json, json};
use stoker_tests::scratch_dir;

use super::h5py_command;

/// Two convolutions with a ReLU between them: 1x7x7 images, 3 filters of 3x3 (5x5 out), then 4
/// filters of 3x3 (3x3 out).
#[derive(Module, Debug)]
struct Net {
    conv1: Conv2d,
    conv2: Conv2d,
}

impl Net {
    fn forward(&self, images: Tensor<4>) -> Tensor<4> {
        self.conv2.forward(relu(self.conv1.forward(images)))
    }
}

impl ConvLayers for Net {
    fn conv_layers(&self, images: Tensor<4>) -> Vec<(&Conv2d, Tensor<4>)> {
        let hidden = relu(self.conv1.forward(images.clone()));
        vec![(&self.conv1, images), (&self.conv2, hidden)]
    }
}

/// `count` batches of 2 images of 1x7x7, values in [-1, 1].
fn images(count: usize, device: &burn::tensor::Device) -> Vec<Tensor<4>> {
    (0..count)
        .map(|b| {
            let values: Vec<f32> = (0..2 * 49).map(|i| ((b * 98 + i) as f32 * 0.731 + 0.3).sin()).collect();
            Tensor::from_data(TensorData::new(values, [2, 1, 7, 7]), device)
        })
        .collect()
}

fn host(tensor: Tensor<4>) -> Json {
    let dims = tensor.dims();
    json!({"dims": dims, "values": tensor.into_data().iter::<f32>().collect::<Vec<f32>>()})
}

/// neon's algorithm in numpy from the trained weights and the batches, compared with the file:
/// the layout (every object's kind, type, shape and attributes) and the mismatches found.
const NEON_IN_NUMPY: &str = r#"
import h5py, json, sys
import numpy as np
d = json.load(open(sys.argv[2]))
arr = lambda t: np.array(t["values"], np.float32).reshape(t["dims"])
W = [arr(d["w1"]), arr(d["w2"])]
b1 = np.array(d["b1"], np.float32)
batches = [arr(b) for b in d["batches"]]
max_fm, searched = d["max_fm"], d["searched"]

def conv(x, w):
    k, c, kh, kw = w.shape
    ho, wo = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((k, ho, wo), np.float32)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("kc,chw->khw", w[:, :, i, j], x[:, i:i + ho, j:j + wo])
    return out

def bprop_conv(e, w, shape):
    k, c, kh, kw = w.shape
    g = np.zeros(shape, np.float32)
    ho, wo = e.shape[1:]
    for i in range(kh):
        for j in range(kw):
            g[:, i:i + ho, j:j + wo] += np.einsum("kc,khw->chw", w[:, :, i, j], e)
    return g

def layers(x):
    o1 = conv(x, W[0])
    h = np.maximum(o1 + b1[:, None, None], 0)
    return [(x, o1), (h, conv(h, W[1]))]

def scale_to_rgb(img):
    img = img.astype(np.float32)
    lo = np.min(img)
    rng = np.max(img) - lo
    img = img - lo
    if rng > 0:
        img /= rng
        img *= 255.
    return img

# get_layer_acts over the batches 0..=n
recs = [[[-np.inf, 0, 0, 0] for _ in range(min(w.shape[0], max_fm))] for w in W]
stored = {}
for b in range(searched):
    x = batches[b]
    n = x.shape[0]
    outs = [layers(x[i]) for i in range(n)]
    store = set()
    for l in range(2):
        acts = np.stack([outs[i][l][1] for i in range(n)], axis=-1)
        flat = acts.reshape(acts.shape[0], -1)
        for fm in range(len(recs[l])):
            a = int(flat[fm].argmax())
            if flat[fm, a] > recs[l][fm][0]:
                recs[l][fm] = [float(flat[fm, a]), b, a % n, a // n]
                store.add(a % n)
    if store:
        stored[b] = sorted(store)

mismatches = []
shown = [0, 0]
layout = {}
with h5py.File(sys.argv[1], "r") as f:
    def visit(name, obj):
        if not name.startswith("deconv"):
            return
        entry = {"attrs": {k: [str(v.dtype), v.tolist()] for k, v in obj.attrs.items()}}
        if isinstance(obj, h5py.Dataset):
            entry.update(kind="dataset", dtype=str(obj.dtype), shape=list(obj.shape), compressed=obj.compression)
        else:
            entry["kind"] = "group"
        layout[name] = entry
    f.visititems(visit)
    for l in range(2):
        g = f["deconv/max_act/%04d" % l]
        for fm, (act, b, i, loc) in enumerate(recs[l]):
            got = (g["batch_img"][fm].tolist(), int(g["fm_loc"][fm, 0]), float(g["activation"][fm, 0]))
            if got[0] != [b, i] or got[1] != loc or abs(got[2] - act) > 1e-4 * max(1.0, abs(act)):
                mismatches.append("layer %d fm %d: file %s, numpy %s" % (l, fm, got, (b, i, loc, act)))
                continue
            # visualize_layer: guided backpropagation from that activation
            x = batches[b][i]
            L = layers(x)
            out = L[l][1]
            e = np.zeros(out.shape, np.float32)
            e.reshape(out.shape[0], -1)[fm, loc] = np.float32(g["activation"][fm, 0])
            for k in range(l, -1, -1):
                e = np.maximum(e, 0)
                e = bprop_conv(e, W[k], L[k][0].shape)
                e = e * (L[k][0] > 0)
            vis = scale_to_rgb(np.transpose(e, (1, 2, 0))).astype(np.uint8)
            diff = np.abs(vis.astype(int) - g["vis"][fm].astype(int)).max()
            top = int(g["vis"][fm].max())
            # scale_to_rgb takes a projection that is not all zero to 0..=255.
            if diff > 1 or top not in (0, 255):
                mismatches.append("layer %d fm %d: vis differs by %d (max %d)" % (l, fm, diff, top))
            if top == 255:
                shown[l] += 1
    for b, idx in stored.items():
        g = f["deconv/img/batch_%d" % b]
        imgs = batches[b][idx]
        hwc = scale_to_rgb(np.transpose(np.transpose(imgs, (1, 2, 3, 0)), (1, 2, 0, 3))).astype(np.uint8)
        diff = np.abs(hwc.astype(int) - g["HWC_uint8"][...].astype(int)).max()
        if diff > 1:
            mismatches.append("batch %d: images differ by %d" % (b, diff))
print(json.dumps({"layout": layout, "mismatches": mismatches, "shown": shown, "stored": {str(b): i for b, i in stored.items()}}))
"#;

#[test]
fn callback_data_deconv_holds_neons_guided_backprop_layout_read_back_by_h5py() {
    let dir = scratch_dir("callback-data-deconv");
    let device = burn_stoker::device::cpu();
    let net = Net {
        conv1: Conv2dConfig::new([1, 3], [3, 3]).init(&device),
        conv2: Conv2dConfig::new([3, 4], [3, 3]).init(&device),
    };
    // 8 validation batches: 25% is int(2.5) = 2, and neon's loop takes the batches 0..=2.
    let valid = images(8, &device);
    let report = Trainer::new(net, burn::optim::SgdConfig::new().init(), images(3, &device))
        .max_epoch(1)
        .learning_rate(0.01)
        .log_dir(&dir)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((CallbackDataWriter::new("data.h5"), Deconv::new("data.h5", valid.clone()).max_fm(3)))
        .train(|model: &Net, batch: Tensor<4>, _step: &mut Step<'_>| {
            model.forward(batch).powi_scalar(2).mean()
        })
        .unwrap();
    let model = report.model;
    let input = json!({
        "w1": host(model.conv1.weight.val()),
        "w2": host(model.conv2.weight.val()),
        "b1": model.conv1.bias.as_ref().unwrap().val().into_data().iter::<f32>().collect::<Vec<f32>>(),
        "batches": valid.into_iter().map(host).collect::<Vec<_>>(),
        "max_fm": 3,
        "searched": 3,
    });
    let input_path = dir.join("input.json");
    std::fs::write(&input_path, input.to_string()).unwrap();
    let output = h5py_command(NEON_IN_NUMPY).arg(dir.join("data.h5")).arg(&input_path).output().unwrap();
    assert!(output.status.success(), "h5py: {}", String::from_utf8_lossy(&output.stderr));
    let read: Json = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(read["mismatches"], json!([]), "{read}");
    // Not a vacuous match: in each layer, some projections are not all zero (a filter whose
    // receptive field's inputs are all negative projects to zero, as in neon).
    let shown: Vec<u64> = read["shown"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    assert!(shown.iter().all(|&n| n >= 1), "projections not all zero, per layer: {shown:?}");

    // neon's layout: a group per convolution, its four datasets with neon's types and shapes
    // (min(filters, max_fm) = 3 rows each; `vis` the image's height, width, channels).
    let layout = read["layout"].as_object().unwrap();
    let group = json!({"attrs": {}, "kind": "group"});
    for name in ["deconv", "deconv/max_act", "deconv/img", "deconv/max_act/0000", "deconv/max_act/0001"] {
        assert_eq!(layout[name], group, "{name}");
    }
    let set = |dtype: &str, shape: Json| json!({"attrs": {}, "kind": "dataset", "dtype": dtype, "shape": shape, "compressed": null});
    for layer in ["0000", "0001"] {
        let at = |name: &str| layout[&format!("deconv/max_act/{layer}/{name}")].clone();
        assert_eq!(at("batch_img"), set("uint16", json!([3, 2])));
        assert_eq!(at("fm_loc"), set("int16", json!([3, 1])));
        assert_eq!(at("vis"), set("uint8", json!([3, 7, 7, 1])));
        assert_eq!(at("activation"), set("float32", json!([3, 1])));
    }
    // The images that set a record, per batch searched: (height, width, channels, images),
    // gzip-compressed, an attribute per image (its index in the batch -> its place).
    let stored = read["stored"].as_object().unwrap();
    assert!(!stored.is_empty() && stored.keys().all(|b| ["0", "1", "2"].contains(&b.as_str())), "{stored:?}");
    let batches: Vec<&String> =
        layout.keys().filter(|k| k.starts_with("deconv/img/batch_") && !k.ends_with("HWC_uint8")).collect();
    assert_eq!(batches.len(), stored.len(), "{batches:?}");
    for (b, indices) in stored {
        let indices = indices.as_array().unwrap();
        let attrs: serde_json::Map<String, Json> =
            indices.iter().enumerate().map(|(place, i)| (i.to_string(), json!(["int64", place]))).collect();
        let group = &layout[&format!("deconv/img/batch_{b}")];
        assert_eq!(group["attrs"], Json::Object(attrs), "batch {b}");
        let images = &layout[&format!("deconv/img/batch_{b}/HWC_uint8")];
        assert_eq!((&images["dtype"], &images["shape"]), (&json!("uint8"), &json!([7, 7, 1, indices.len()])));
        assert_eq!(images["compressed"], "gzip", "batch {b}");
    }
    // In the same file as the rest of neon's callback data.
    let config = h5py_command("import h5py, sys; print(list(h5py.File(sys.argv[1], 'r').keys()))")
        .arg(dir.join("data.h5"))
        .output()
        .unwrap();
    let keys = String::from_utf8_lossy(&config.stdout);
    assert!(keys.contains("'config'") && keys.contains("'deconv'") && keys.contains("'cost'"), "{keys}");
}
