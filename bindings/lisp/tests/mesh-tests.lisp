;;;; mesh-tests.lisp - the mesh calls against a double-float oracle written here:
;;;; the closest point of every triangle by its regions (the projection when it
;;;; lies in the triangle, else the nearest clamped point of the three edges),
;;;; signs on a closed cube and an open box, the report by the header's
;;;; nearest-rank rule.

(in-package #:knn-gpgpu-tests)

;;; ---- meshes ------------------------------------------------------------------------

(defun cube-vertices ()
  "The cube [-1, 1]^3: vertex (x, y, z) at index 4*[x>0] + 2*[y>0] + [z>0]."
  (let ((v (make-array 24 :element-type 'double-float)))
    (dotimes (i 8 v)
      (setf (aref v (* 3 i)) (if (logbitp 2 i) 1d0 -1d0)
            (aref v (+ 1 (* 3 i))) (if (logbitp 1 i) 1d0 -1d0)
            (aref v (+ 2 (* 3 i))) (if (logbitp 0 i) 1d0 -1d0)))))

(defun cube-faces (&key (lid t))
  "12 outward triangles (10 without the lid, the face z = 1)."
  (let ((quads '((0 1 3 2) (4 6 7 5) (0 4 5 1) (2 3 7 6) (0 2 6 4) (1 5 7 3)))
        (out '()))
    (dolist (q quads)
      (destructuring-bind (a b c d) q
        (unless (and (not lid) (equal q '(1 5 7 3)))
          (push (list a b c) out)
          (push (list a c d) out))))
    (let ((flat (apply #'append (nreverse out))))
      (make-array (length flat) :element-type '(signed-byte 32) :initial-contents flat))))

(defun with-degenerates (vertices faces)
  "Adds a needle (3 collinear points), a point triangle and a repeated vertex."
  (let* ((base (floor (length vertices) 3))
         (v (concatenate '(simple-array double-float (*)) vertices
                         '(3d0 0d0 0d0 4d0 0d0 0d0 5d0 0d0 0d0 0d0 3d0 3d0)))
         (f (concatenate '(simple-array (signed-byte 32) (*)) faces
                         (list base (+ base 1) (+ base 2) (+ base 3) (+ base 3) (+ base 3)
                               base base (+ base 1)))))
    (values v f)))

(defun random-points (seed n scale)
  (let ((state (sb-ext:seed-random-state seed))
        (v (make-array (* 3 n) :element-type 'double-float)))
    (dotimes (i (length v) v)
      (setf (aref v i) (- (random (* 2 scale) state) scale)))))

;;; ---- the oracle --------------------------------------------------------------------

(defun v3 (v i) (list (aref v (* 3 i)) (aref v (+ 1 (* 3 i))) (aref v (+ 2 (* 3 i)))))
(defun v- (a b) (mapcar #'- a b))
(defun v+ (a b) (mapcar #'+ a b))
(defun v* (s a) (mapcar (lambda (x) (* s x)) a))
(defun dot (a b) (reduce #'+ (mapcar #'* a b)))
(defun cross (a b)
  (destructuring-bind ((a0 a1 a2) (b0 b1 b2)) (list a b)
    (list (- (* a1 b2) (* a2 b1)) (- (* a2 b0) (* a0 b2)) (- (* a0 b1) (* a1 b0)))))

(defun triangle-closest (q a b c)
  "(values squared-distance closest-point) of triangle (a b c) to q, in double-float."
  (let ((best nil) (best-d nil))
    (loop for (p0 p1) in (list (list a b) (list b c) (list c a))
          do (let* ((d (v- p1 p0))
                    (l2 (dot d d))
                    (tt (if (plusp l2) (max 0d0 (min 1d0 (/ (dot (v- q p0) d) l2))) 0d0))
                    (p (v+ p0 (v* tt d)))
                    (dist (dot (v- q p) (v- q p))))
               (when (or (null best-d) (< dist best-d)) (setf best p best-d dist))))
    (let* ((n (cross (v- b a) (v- c a)))
           (nn (dot n n)))
      (when (plusp nn)
        (let* ((proj (v- q (v* (/ (dot (v- q a) n) nn) n)))
               (inside (every (lambda (uw)
                                (>= (dot (cross (v- (second uw) (first uw)) (v- proj (first uw))) n)
                                    0))
                              (list (list a b) (list b c) (list c a))))
               (dist (dot (v- q proj) (v- q proj))))
          (when (and inside (< dist best-d)) (setf best proj best-d dist)))))
    (values best-d best)))

(defun mesh-oracle (vertices faces q)
  "A vector of (squared-distance . closest-point) per triangle for point Q."
  (let ((nt (floor (length faces) 3)))
    (coerce (loop for t0 below nt
                  collect (multiple-value-bind (d p)
                              (triangle-closest q (v3 vertices (aref faces (* 3 t0)))
                                                (v3 vertices (aref faces (+ 1 (* 3 t0))))
                                                (v3 vertices (aref faces (+ 2 (* 3 t0)))))
                            (cons d p)))
            'vector)))

(defun close-to (a b tol) (<= (abs (- a b)) (* tol (max 1d0 (abs a) (abs b)))))

(defun nanp (x) (and (floatp x) (sb-ext:float-nan-p x)))
(defun infp (x) (and (floatp x) (sb-ext:float-infinity-p x)))

;;; ---- closest ----------------------------------------------------------------------

(deftest mesh-closest-matches-a-double-oracle
  (multiple-value-bind (vertices faces) (with-degenerates (cube-vertices) (cube-faces))
    (let ((points (random-points 41 120 3d0)))
      ;; a vertex and an edge midpoint: distance 0
      (replace points '(1d0 1d0 1d0 0d0 -1d0 -1d0))
      (dolist (scalar '(:float64 :float32))
        (let ((tol (if (eq scalar :float64) 1d-12 1d-5))
              (pts (if (eq scalar :float64) points (map '(simple-array single-float (*))
                                                         (lambda (x) (coerce x 'single-float))
                                                         points))))
          (knn:with-mesh (mesh vertices faces :scalar scalar :backend :openmp)
            (check (eq (knn:mesh-scalar mesh) scalar))
            (check (= (knn:mesh-n-triangles mesh) 15))
            (check (not (knn:mesh-closed-oriented mesh)) "the degenerates open it")
            (multiple-value-bind (ids sq cl bc) (knn:mesh-closest mesh pts :barycentric t)
              (check (typep sq (if (eq scalar :float64) '(simple-array double-float (*))
                                   '(simple-array single-float (*)))))
              (check (= (length cl) (length bc) 360))
              (check (and (zerop (aref sq 0)) (zerop (aref sq 1))) "on the surface")
              (dotimes (i 120)
                (let* ((q (mapcar (lambda (x) (coerce x 'double-float)) (v3 pts i)))
                       (all (mesh-oracle vertices faces q))
                       (best (reduce #'min all :key #'car))
                       (id (aref ids i))
                       (mine (aref all id)))
                  (check (close-to (aref sq i) best tol) (format nil "~A point ~D distance" scalar i))
                  (check (close-to (car mine) best tol) (format nil "~A point ~D triangle" scalar i))
                  (check (every (lambda (a b) (close-to a b tol)) (v3 cl i) (cdr mine))
                         (format nil "~A point ~D closest point" scalar i))
                  ;; no smaller id is clearly closer (ties to the smaller id)
                  (check (loop for j below id never (< (car (aref all j)) (- best (* tol (+ 1 best))))))
                  ;; the weights rebuild the closest point
                  (let ((w (v3 bc i))
                        (corners (loop for k below 3
                                       collect (v3 vertices (aref faces (+ k (* 3 id)))))))
                    (check (close-to (reduce #'+ w) 1d0 tol))
                    (check (every (lambda (a b) (close-to a b (* 4 tol)))
                                  (reduce #'v+ (mapcar #'v* w corners)) (v3 cl i))
                           (format nil "~A point ~D weights" scalar i))))))))))))

(deftest mesh-max-distance
  (knn:with-mesh (mesh (cube-vertices) (cube-faces))
    (let ((points (random-points 5 60 4d0)))
      (multiple-value-bind (ids sq cl) (knn:mesh-closest mesh points :max-distance 1.5d0)
        (multiple-value-bind (sd sd-ids) (knn:mesh-signed-distance mesh points :max-distance 1.5d0)
          (let ((beyond 0))
            (dotimes (i 60)
              (let ((best (reduce #'min (mesh-oracle (cube-vertices) (cube-faces)
                                                     (v3 points i))
                                  :key #'car)))
                (if (> best 2.25d0)
                    (progn (incf beyond)
                           (check (= (aref ids i) (aref sd-ids i) -1))
                           (check (and (infp (aref sq i)) (infp (aref sd i)) (plusp (aref sd i))))
                           (check (nanp (aref cl (* 3 i)))))
                    (check (and (>= (aref ids i) 0) (close-to (aref sq i) best 1d-12))))))
            (check (< 0 beyond 60) "some points beyond, some within")))))))

;;; ---- signs ------------------------------------------------------------------------

(deftest mesh-signed-distance-on-the-cube
  (knn:with-mesh (mesh (cube-vertices) (cube-faces))
    (check (knn:mesh-closed-oriented mesh))
    (multiple-value-bind (nv nt scalar backend closed) (knn:mesh-info mesh)
      (check (equal (list nv nt scalar closed) '(8 12 :float64 t)))
      (check (member backend '(:cuda :openmp))))
    (let* ((inner (map '(simple-array double-float (*)) (lambda (x) (* 0.3d0 x))
                       (random-points 7 50 3d0)))
           (outer (random-points 8 50 3d0))
           (sd-in (knn:mesh-signed-distance mesh inner))
           (sd-out (knn:mesh-signed-distance mesh outer)))
      (dotimes (i 50)
        (let ((q (v3 inner i)))
          (check (close-to (aref sd-in i) (- (reduce #'max (mapcar #'abs q)) 1d0) 1d-15)
                 (format nil "inside ~D" i)))
        (let* ((q (v3 outer i))
               (out (> (reduce #'max (mapcar #'abs q)) 1d0))
               (d (sqrt (reduce #'min (mesh-oracle (cube-vertices) (cube-faces) q) :key #'car))))
          (check (eq (plusp (aref sd-out i)) out) (format nil "sign ~D" i))
          (check (close-to (abs (aref sd-out i)) d 1d-12) (format nil "distance ~D" i)))))))

(deftest mesh-signed-distance-on-an-open-box
  ;; No lid: the sign comes from the winding number, about 5/6 inside the box
  ;; below the opening and 0 far away.
  (knn:with-mesh (mesh (cube-vertices) (cube-faces :lid nil))
    (check (not (knn:mesh-closed-oriented mesh)))
    (check (= (knn:mesh-n-triangles mesh) 10))
    (let ((sd (knn:mesh-signed-distance mesh '(0d0 0d0 -0.5d0 0.5d0 -0.5d0 0d0 6d0 0d0 0d0
                                                 0d0 -7d0 1d0))))
      (check (and (minusp (aref sd 0)) (minusp (aref sd 1))) "inside")
      (check (and (plusp (aref sd 2)) (plusp (aref sd 3))) "outside")
      (check (close-to (aref sd 2) 5d0 1d-15)))))

;;; ---- the deviation report ---------------------------------------------------------

(defun nearest-rank (sorted p)
  (aref sorted (max 0 (1- (ceiling (* (/ (rational p) 100) (length sorted)))))))

(deftest mesh-deviation-report-matches-its-definition
  (knn:with-mesh (mesh (cube-vertices) (cube-faces))
    (let* ((points (random-points 12 400 1.3d0))
           (percentiles '(0 0.5d0 10 50 90 99.5d0 100))
           (edges '(-0.5d0 -0.1d0 0d0 0.1d0 0.2d0))
           (report (knn:mesh-deviation-report mesh points 0.1d0 :percentiles percentiles
                                                               :bin-edges edges :max-distance 0.25d0
                                                               :distances t))
           (sd (knn:mesh-signed-distance mesh points :max-distance 0.25d0))
           (measured (sort (remove-if #'infp (copy-seq sd)) #'<)))
      (check (equalp (knn:deviation-report-signed-distances report) sd) "per-point values")
      (check (= (knn:deviation-report-n-points report) 400))
      (check (= (knn:deviation-report-n-measured report) (length measured)))
      (check (= (knn:deviation-report-n-beyond report) (- 400 (length measured))))
      (check (< 0 (length measured) 400))
      (check (= (knn:deviation-report-min report) (aref measured 0)))
      (check (= (knn:deviation-report-max report) (aref measured (1- (length measured)))))
      (check (close-to (knn:deviation-report-mean report)
                       (/ (reduce #'+ measured) (length measured)) 1d-12))
      (check (close-to (knn:deviation-report-rms report)
                       (sqrt (/ (reduce #'+ (map 'list (lambda (x) (* x x)) measured))
                                (length measured)))
                       1d-12))
      (check (every #'= (knn:deviation-report-percentile-values report)
                    (mapcar (lambda (p) (nearest-rank measured p)) percentiles))
             "nearest rank")
      (check (= (knn:deviation-report-n-within-tolerance report)
                (count-if (lambda (d) (<= -0.1d0 d 0.1d0)) measured)))
      (check (= (knn:deviation-report-n-above-tolerance report) (count-if (lambda (d) (> d 0.1d0)) measured)))
      (check (= (knn:deviation-report-n-below-tolerance report) (count-if (lambda (d) (< d -0.1d0)) measured)))
      (let ((e (coerce edges 'vector)))
        (check (every #'= (knn:deviation-report-bin-counts report)
                      (loop for b below 4
                            collect (count-if (lambda (d) (or (and (<= (aref e b) d) (< d (aref e (1+ b))))
                                                              (and (= b 3) (= d (aref e 4)))))
                                              measured)))
               "histogram")
        (check (= (knn:deviation-report-n-below-bins report) (count-if (lambda (d) (< d (aref e 0))) measured)))
        (check (= (knn:deviation-report-n-above-bins report) (count-if (lambda (d) (> d (aref e 4))) measured)))))))

;;; ---- serialization, lifetime, errors -----------------------------------------------

(deftest mesh-serialize-round-trip
  (multiple-value-bind (vertices faces) (with-degenerates (cube-vertices) (cube-faces))
    (dolist (scalar '(:float32 :float64))
      (knn:with-mesh (mesh vertices faces :scalar scalar)
        (let* ((bytes (knn:serialize-mesh mesh))
               (loaded (knn:deserialize-mesh bytes :backend :openmp))
               (points (random-points 3 40 3d0))
               (points (if (eq scalar :float32)
                           (map '(simple-array single-float (*)) (lambda (x) (coerce x 'single-float))
                                points)
                           points)))
          (unwind-protect
               (progn
                 (check (eq (knn:mesh-scalar loaded) scalar))
                 (check (= (knn:mesh-n-triangles loaded) 15))
                 (check (equalp (knn:serialize-mesh loaded) bytes) "saves to the same bytes")
                 (check (equalp (multiple-value-list (knn:mesh-closest mesh points :barycentric t))
                                (multiple-value-list (knn:mesh-closest loaded points :barycentric t)))
                        "same answers"))
            (knn:free-mesh loaded))
          (check-signals knn:knn-invalid-argument
                         (knn:deserialize-mesh (subseq bytes 0 (1- (length bytes))))))))
    (check-signals knn:knn-invalid-argument
                   (knn:deserialize-mesh (make-array 40 :element-type '(unsigned-byte 8)
                                                        :initial-element 7)))))

(deftest mesh-errors
  (let ((vertices (cube-vertices))
        (faces (cube-faces)))
    (let ((e (check-signals knn:knn-invalid-argument
                            (knn:build-mesh vertices (concatenate 'vector faces '(0 1 99))))))
      (when e
        (check (search "99" (knn:knn-error-message e)) (knn:knn-error-message e))
        (check (string= (knn:knn-error-function e) "knn_mesh_build_f64"))))
    (let ((bad (copy-seq vertices)))
      (setf (aref bad 13) (sb-kernel:make-double-float -524288 0))
      (let ((e (check-signals knn:knn-nonfinite-input (knn:build-mesh bad faces))))
        (when e (check (search "4" (knn:knn-error-message e)) (knn:knn-error-message e)))))
    (check-signals knn:knn-invalid-argument (knn:build-mesh vertices #()))
    (check-signals knn:knn-usage-error (knn:build-mesh vertices '(0 1)))
    (check-signals knn:knn-usage-error (knn:build-mesh vertices (list 0 1 (expt 2 40))))
    (check-signals knn:knn-usage-error (knn:build-mesh '(0d0 1d0) faces))
    (knn:with-mesh (mesh vertices faces)
      (check-signals knn:knn-invalid-argument (knn:mesh-closest mesh '(0 0 0) :max-distance -1))
      (check-signals knn:knn-invalid-argument (knn:mesh-deviation-report mesh '(0 0 0) -1))
      (check-signals knn:knn-invalid-argument
                     (knn:mesh-deviation-report mesh '(0 0 0) 0.1d0 :percentiles '(101)))
      (check-signals knn:knn-invalid-argument
                     (knn:mesh-deviation-report mesh '(0 0 0) 0.1d0 :bin-edges '(1 0)))
      (check-signals knn:knn-usage-error (knn:mesh-closest mesh '(0 0)))
      ;; the next call works
      (check (= (aref (knn:mesh-closest mesh '(0d0 0d0 5d0)) 0) 10) "the lid's diagonal: ties to the smaller id"))
    (knn:with-mesh (mesh32 (map 'vector (lambda (x) (coerce x 'single-float)) vertices) faces)
      (check (eq (knn:mesh-scalar mesh32) :float32))
      (check-signals knn:knn-usage-error (knn:mesh-closest mesh32 '(0.1d0 0d0 5d0))))
    (let ((mesh (knn:build-mesh vertices faces)))
      (knn:free-mesh mesh)
      (knn:free-mesh mesh)
      (check (knn:mesh-closed-p mesh))
      (check-signals knn:knn-usage-error (knn:mesh-closest mesh '(0 0 0))))
    (let ((small (knn:estimate-mesh-bytes 1000 2000))
          (big (knn:estimate-mesh-bytes 1000000 2000000))
          (wide (knn:estimate-mesh-bytes 1000000 2000000 nil :float64)))
      (check (zerop (knn:estimate-mesh-bytes -1 10)) "impossible sizes estimate 0")
      (check (<= small big wide) "estimates grow")
      (when (has-device)                ; a CUDA build's model (a build without CUDA answers 0)
        (check (< 0 small big wide) "estimates of a CUDA build")))))

;;; ---- alignment ---------------------------------------------------------------------

(defun skewed-box-vertices ()
  "The box [-1, 1] x [-0.7, 0.7] x [-0.5, 0.5] (CUBE-VERTICES' numbering) with
the corner (+ + +) pulled out to (1.4 1.1 0.9): closed, and no rigid motion
but the identity maps it onto itself."
  (let ((v (cube-vertices)))
    (dotimes (i 8)
      (setf (aref v (+ 1 (* 3 i))) (* 0.7d0 (aref v (+ 1 (* 3 i))))
            (aref v (+ 2 (* 3 i))) (* 0.5d0 (aref v (+ 2 (* 3 i))))))
    (replace v '(1.4d0 1.1d0 0.9d0) :start1 21)))

(defun surface-samples (vertices faces n)
  "n(n+1)/2 points inside each triangle, on a regular barycentric grid, as a flat double vector."
  (let ((out '()))
    (dotimes (f (floor (length faces) 3))
      (let ((corners (loop for k below 3 collect (v3 vertices (aref faces (+ k (* 3 f)))))))
        (dotimes (i n)
          (dotimes (j (- n i))
            (let* ((a (/ (+ i 1/3) n)) (b (/ (+ j 1/3) n)) (c (- 1 a b)))
              (dolist (x (reduce #'v+ (mapcar #'v* (list a b c) corners)))
                (push (coerce x 'double-float) out)))))))
    (coerce (nreverse out) '(simple-array double-float (*)))))

(defun rotation (axis angle)
  "The rotation by ANGLE about AXIS (Rodrigues), as a list of 3 rows."
  (let* ((k (v* (/ (sqrt (dot axis axis))) axis))
         (c (cos angle)) (s (sin angle)))
    (loop for i below 3
          collect (loop for j below 3
                        collect (+ (if (= i j) c 0d0)
                                   (* (- 1 c) (nth i k) (nth j k))
                                   (* s (let ((e (mod (- j i) 3)))
                                          ;; [k]x: row i, column j = -eps(i j l) k_l
                                          (cond ((= e 1) (- (nth (- 3 i j) k)))
                                                ((= e 2) (nth (- 3 i j) k))
                                                (t 0d0)))))))))

(defun rigid-matrix (rows translation)
  "The row-major (4 4) double-float array of x -> ROWS x + TRANSLATION."
  (let ((m (make-array '(4 4) :element-type 'double-float :initial-element 0d0)))
    (dotimes (i 3)
      (dotimes (j 3) (setf (aref m i j) (nth j (nth i rows))))
      (setf (aref m i 3) (nth i translation)))
    (setf (aref m 3 3) 1d0)
    m))

(defun transform-points (rows translation points)
  (let ((out (make-array (length points) :element-type 'double-float)))
    (dotimes (p (floor (length points) 3) out)
      (let ((x (v3 points p)))
        (dotimes (i 3)
          (setf (aref out (+ i (* 3 p))) (+ (dot (nth i rows) x) (nth i translation))))))))

(deftest mesh-align-recovers-a-rigid-motion
  ;; The scan is the sampled surface moved by x -> R x + t; the fit must find
  ;; the inverse, x -> R^T x - R^T t, computed here.
  (let* ((vertices (skewed-box-vertices))
         (faces (cube-faces))
         (surface (surface-samples vertices faces 8))
         (r (rotation '(1d0 2d0 3d0) 0.08d0))
         (tr '(0.05d0 -0.03d0 0.04d0))
         (scan (transform-points r tr surface))
         (r-inverse (loop for i below 3 collect (loop for j below 3 collect (nth i (nth j r)))))
         (want (rigid-matrix r-inverse (v* -1 (mapcar (lambda (row) (dot row tr)) r-inverse))))
         (m (floor (length scan) 3)))
    (dolist (scalar '(:float64 :float32))
      (let ((tol (if (eq scalar :float64) 1d-6 1d-4))
            (pts (if (eq scalar :float64) scan
                     (map '(simple-array single-float (*)) (lambda (x) (coerce x 'single-float))
                          scan))))
        (knn:with-mesh (mesh vertices faces :scalar scalar)
          (check (knn:mesh-closed-oriented mesh))
          (let ((fit (knn:mesh-align mesh pts :max-correspondence 0.5d0)))
            (check (knn:align-result-converged fit) (format nil "~A converged" scalar))
            (check (= (knn:align-result-n-kept fit) m) (format nil "~A every point kept" scalar))
            (check (< 1 (knn:align-result-iterations fit) 50))
            (check (< (knn:align-result-rms fit) tol) (format nil "~A rms ~A" scalar
                                                              (knn:align-result-rms fit)))
            (check (zerop (knn:align-result-degenerate-directions fit)))
            (check (zerop (knn:align-result-n-degenerate fit)))
            (let ((got (knn:align-result-transform fit)))
              (check (equal (array-dimensions got) '(4 4)))
              (dotimes (i 16)
                (check (close-to (row-major-aref got i) (row-major-aref want i) tol)
                       (format nil "~A transform[~D] = ~A, the inverse motion's ~A" scalar i
                               (row-major-aref got i) (row-major-aref want i))))))
          ;; one step from there is not the fit: the cap is obeyed and said
          (let ((step (knn:mesh-align mesh pts :max-iterations 1)))
            (check (= (knn:align-result-iterations step) 1))
            (check (not (knn:align-result-converged step)) "one step has not converged"))
          ;; started at the answer (given flat), it stays there
          (let ((again (knn:mesh-align mesh pts :initial (knn::double-vector want "want"))))
            (check (knn:align-result-converged again))
            (check (every (lambda (i) (close-to (row-major-aref (knn:align-result-transform again) i)
                                                (row-major-aref want i) tol))
                          (loop for i below 16 collect i))
                   (format nil "~A started at the answer" scalar))))))))

(deftest mesh-align-errors
  (knn:with-mesh (mesh (skewed-box-vertices) (cube-faces))
    (let ((points (surface-samples (skewed-box-vertices) (cube-faces) 3))
          (scaled (rigid-matrix '((2d0 0d0 0d0) (0d0 1d0 0d0) (0d0 0d0 1d0)) '(0d0 0d0 0d0))))
      (let ((e (check-signals knn:knn-invalid-argument
                              (knn:mesh-align mesh points :max-iterations -1))))
        (when e (check (search "max_iterations" (knn:knn-error-message e))
                       (knn:knn-error-message e))))
      (check-signals knn:knn-invalid-argument (knn:mesh-align mesh points :initial scaled)
                     "a scaling is no rigid motion")
      (check-signals knn:knn-invalid-argument (knn:mesh-align mesh points :kept-fraction 2))
      (check-signals knn:knn-invalid-argument (knn:mesh-align mesh points :max-correspondence -1))
      (check-signals knn:knn-usage-error (knn:mesh-align mesh points :initial '(1 0 0 1)))
      (check-signals knn:knn-usage-error (knn:mesh-align mesh points :max-iterations (expt 2 40)))
      ;; the next call works
      (check (knn:align-result-converged (knn:mesh-align mesh points))))))
