//! Protocol-buffer encoding, by hand: the few wire shapes the event files use.

/// A protocol-buffer message being encoded.
#[derive(Default)]
pub(super) struct Proto(pub(super) Vec<u8>);

impl Proto {
    pub(super) fn key(&mut self, field: u32, wire_type: u8) {
        self.raw_varint((u64::from(field) << 3) | u64::from(wire_type));
    }
    pub(super) fn raw_varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }
    pub(super) fn varint(&mut self, field: u32, value: u64) {
        self.key(field, 0);
        self.raw_varint(value);
    }
    pub(super) fn double(&mut self, field: u32, value: f64) {
        self.key(field, 1);
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    pub(super) fn float(&mut self, field: u32, value: f32) {
        self.key(field, 5);
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    pub(super) fn bytes(&mut self, field: u32, value: &[u8]) {
        self.key(field, 2);
        self.raw_varint(value.len() as u64);
        self.0.extend_from_slice(value);
    }
    pub(super) fn message(&mut self, field: u32, message: &Proto) {
        self.bytes(field, &message.0);
    }
    pub(super) fn packed_doubles(&mut self, field: u32, values: &[f64]) {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.bytes(field, &bytes);
    }
}
