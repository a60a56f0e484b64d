import {
  to = lium_pod.gpu
  id = "0b6f6f7e-1d2c-4b8a-9a53-5c2f0d7e8a42"
}
